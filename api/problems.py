"""RFC 9457 problem details: every error the API answers is one of these.

    {"type": "urn:relay:problem:validation-error", "title": "Invalid request",
     "status": 400, "detail": "email: Enter a valid email address.",
     "errors": [{"field": "email", "message": "Enter a valid email address."}]}

Plain HTTP errors (401, 403, 404, 405, 413, 415, 500...) use `about:blank` as
their type and the status phrase as their title, as the RFC suggests; errors
a client may want to tell apart carry a `urn:relay:problem:<slug>` type. No
problem carries `instance` or echoes the request, so a 404 for another
account's object is byte-identical to a 404 for one that never existed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from http import HTTPStatus
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse
from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import set_rollback

logger = logging.getLogger("relay.api")

PROBLEM_CONTENT_TYPE = "application/problem+json"
BLANK = "about:blank"


def problem_type(slug: str) -> str:
    return f"urn:relay:problem:{slug}"


VALIDATION_ERROR = problem_type("validation-error")
MALFORMED_BODY = problem_type("malformed-body")
INVALID_STATE = problem_type("invalid-state")
CONFLICT = problem_type("conflict")
THROTTLED = problem_type("throttled")
UNPROCESSABLE = problem_type("unprocessable")


class Problem(exceptions.APIException):
    """An error answered as a problem document. Subclasses fix status, type and title.

    `extensions` become extra members of the document (RFC 9457 section 3.2),
    e.g. `current_state` on a 409; `headers` are added to the response.
    """

    status_code = 400
    type = BLANK
    title: str | None = None  # None: the HTTP status phrase
    default_detail = "The request cannot be served."

    def __init__(
        self,
        detail: str | None = None,
        *,
        extensions: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.extensions = dict(extensions or {})
        self.headers = dict(headers or {})

    def document(self) -> dict[str, Any]:
        return {
            **problem_document(self.status_code, str(self.detail), type_=self.type, title=self.title),
            **self.extensions,
        }


class InvalidInput(Problem):
    """400 with each bad field (a body path like `steps[2].config.url`, or a query parameter) and why."""

    status_code = 400
    type = VALIDATION_ERROR
    title = "Invalid request"

    def __init__(self, errors: list[dict[str, str]], detail: str | None = None) -> None:
        self.errors = errors
        super().__init__(detail or summarize(errors), extensions={"errors": errors})

    @classmethod
    def field(cls, field: str, message: str) -> InvalidInput:
        return cls([{"field": field, "message": message}])


class NotFound(Problem):
    status_code = 404
    default_detail = "Not found."


class Conflict(Problem):
    """409: the request is fine but the object's state does not allow it now."""

    status_code = 409
    type = CONFLICT
    title = "Conflict"


class InvalidState(Conflict):
    """409 for an illegal transition; names the current state so the client can decide what to do."""

    type = INVALID_STATE
    title = "Not allowed in the current state"

    def __init__(self, detail: str, *, current_state: str) -> None:
        super().__init__(detail, extensions={"current_state": current_state})


class PayloadTooLarge(Problem):
    status_code = 413


class Unprocessable(Problem):
    """422: well-formed but refused (e.g. an Idempotency-Key reused with another body)."""

    status_code = 422
    type = UNPROCESSABLE
    title = "Unprocessable request"


class TooManyRequests(Problem):
    """429 with Retry-After (seconds). For limits of the domain; the per-token throttle uses DRF's Throttled."""

    status_code = 429

    def __init__(self, detail: str, *, retry_after: int, type_: str = THROTTLED, title: str = "Too many requests"):
        super().__init__(detail, headers={"Retry-After": str(max(1, int(retry_after)))})
        self.type = type_
        self.title = title


def problem_document(status: int, detail: str, *, type_: str = BLANK, title: str | None = None) -> dict[str, Any]:
    return {
        "type": type_,
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }


def encodable(value: Any) -> Any:
    """The document with every text in it encodable as UTF-8: a lone surrogate (which a client can send as
    `"\\ud800"` in JSON, and which a message may quote) is written as its escape, `\\ud800`, instead of failing
    the rendering of the answer with a UnicodeEncodeError. Every problem document passes through here."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, Mapping):
        return {encodable(key): encodable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encodable(item) for item in value]
    return value


def problem_http_response(status: int, detail: str, *, headers: Mapping[str, str] | None = None) -> HttpResponse:
    """A problem answered outside DRF (middleware, URL resolver, handler404/500), rendered exactly as DRF would."""
    body = JSONRenderer().render(encodable(problem_document(status, detail)))
    response = HttpResponse(body, status=status, content_type=PROBLEM_CONTENT_TYPE)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


# --- Flattening validation errors into paths ------------------------------------


def error_paths(detail: Any, path: str = "") -> Iterator[dict[str, str]]:
    """DRF's nested error detail as [{"field": "steps[2].config.url", "message": ...}].

    Dict keys become `.name` (ints, from ListField, become `[i]`); lists of
    messages are leaves; lists of nested errors (many=True) are indexed.
    Errors about the whole object (non_field_errors) have the object's path.
    """
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            if key == api_settings.NON_FIELD_ERRORS_KEY:
                sub = path
            elif isinstance(key, int):
                sub = f"{path}[{key}]"
            else:
                sub = f"{path}.{key}" if path else str(key)
            yield from error_paths(value, sub)
    elif isinstance(detail, list | tuple):
        if all(not isinstance(item, Mapping | list | tuple) for item in detail):
            for message in detail:
                yield {"field": path, "message": str(message)}
        else:
            for index, item in enumerate(detail):
                if item:  # many=True lists hold {} for the items that were fine
                    yield from error_paths(item, f"{path}[{index}]")
    else:
        yield {"field": path, "message": str(detail)}


def summarize(errors: list[dict[str, str]]) -> str:
    parts = [f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors[:5]]
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more if parts else "The request is invalid."


def django_validation_errors(exc: DjangoValidationError) -> list[dict[str, str]]:
    if hasattr(exc, "error_dict"):
        return [
            {"field": "" if field == "__all__" else field, "message": message}
            for field, messages in exc.message_dict.items()
            for message in messages
        ]
    return [{"field": "", "message": message} for message in exc.messages]


# --- The DRF exception handler ----------------------------------------------------

DomainErrorMap = Mapping[type[Exception], Callable[[Any], exceptions.APIException]]


def _domain_problem(exc: Exception, view: Any) -> exceptions.APIException | None:
    """The view's translation of a domain error (ApiView.domain_errors, merged along the MRO)."""
    for klass in type(view).__mro__ if view is not None else ():
        mapping: DomainErrorMap = vars(klass).get("domain_errors", {})
        for error_type, translate in mapping.items():
            if isinstance(exc, error_type):
                return translate(exc)
    return None


def problem_exception_handler(exc: Exception, context: Mapping[str, Any]) -> Response | None:
    """REST_FRAMEWORK["EXCEPTION_HANDLER"]: every error a view raises, as a problem document.

    Unknown exceptions return None: Django logs them and handler500 answers
    a bare 500 problem, never a traceback.
    """
    translated = _domain_problem(exc, context.get("view"))
    if translated is not None:
        exc = translated
    elif isinstance(exc, Http404):
        exc = NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, DjangoValidationError):
        exc = InvalidInput(django_validation_errors(exc))

    if not isinstance(exc, exceptions.APIException):
        return None

    headers: dict[str, str] = {}
    auth_header = getattr(exc, "auth_header", None)  # NotAuthenticated from an authenticator that names a scheme
    if auth_header:
        headers["WWW-Authenticate"] = auth_header
    wait = getattr(exc, "wait", None)  # Throttled
    if wait:
        headers["Retry-After"] = str(max(1, round(wait)))

    if isinstance(exc, Problem):
        document = exc.document()
        headers.update(exc.headers)
    elif isinstance(exc, exceptions.ValidationError):
        errors = list(error_paths(exc.detail))
        document = {**problem_document(400, summarize(errors), type_=VALIDATION_ERROR, title="Invalid request")}
        document["errors"] = errors
    elif isinstance(exc, exceptions.ParseError):
        document = problem_document(400, str(exc.detail), type_=MALFORMED_BODY, title="Malformed request body")
    elif isinstance(exc, exceptions.Throttled):
        document = problem_document(429, str(exc.detail), type_=THROTTLED, title="Too many requests")
    else:
        detail: Any = exc.detail
        if isinstance(detail, list | dict):
            detail = summarize(list(error_paths(detail)))
        document = problem_document(exc.status_code, str(detail))

    set_rollback()
    document = encodable(document)
    return Response(document, status=document["status"], headers=headers, content_type=PROBLEM_CONTENT_TYPE)


# --- Django-level errors under /api/ -----------------------------------------------


def is_api_request(request: HttpRequest) -> bool:
    return request.path_info.startswith("/api/")


def api_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Any path under /api/ that no endpoint answers."""
    return problem_http_response(404, "Not found.")


def handler404(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return api_not_found(request)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    if is_api_request(request):
        return problem_http_response(500, "The server failed to answer this request; it has been logged.")
    from django.views.defaults import server_error

    return server_error(request)


def handler400(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return problem_http_response(400, "Bad request.")
    from django.views.defaults import bad_request

    return bad_request(request, exception)


def handler403(request: HttpRequest, exception: Exception) -> HttpResponse:
    if is_api_request(request):
        return problem_http_response(403, "You do not have permission to perform this action.")
    from django.views.defaults import permission_denied

    return permission_denied(request, exception)
