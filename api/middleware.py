"""The body size limit for the API, applied before any view or parser reads the body."""

import io
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest, HttpResponse

from api.problems import is_api_request, problem_http_response


def _too_large(limit: int) -> HttpResponse:
    return problem_http_response(413, f"The request body is larger than the limit of {limit} bytes.")


class ApiBodyLimitMiddleware:
    """413 for a body over API_MAX_BODY_BYTES, under /api/ only.

    The declared Content-Length is checked first, so an honest large upload is
    refused without reading a byte. The body actually received is checked too:
    under ASGI a chunked body has no Content-Length, and Django reads it from
    a buffer whose real size is what counts.

    Under WSGI, Django reads no byte more than Content-Length says, so a chunked
    body (Transfer-Encoding, no Content-Length) would be read as empty: a 2 MB
    POST would create a blank contact. When the server marks its input as ending
    where the body ends (`wsgi.input_terminated`: gunicorn, Werkzeug), the body is
    read here, at most one byte past the limit, and handed on as if its length had
    been declared; a server that cannot (Django's runserver) gets 411 Length Required.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_api_request(request):
            refused = self.check(request)
            if refused is not None:
                return refused
        return self.get_response(request)

    @staticmethod
    def check(request: HttpRequest) -> HttpResponse | None:
        limit = settings.API_MAX_BODY_BYTES
        raw_length = request.META.get("CONTENT_LENGTH") or ""
        if not raw_length and request.META.get("HTTP_TRANSFER_ENCODING") and isinstance(request, WSGIRequest):
            return _read_undeclared_body(request, limit)
        try:
            declared = int(raw_length or "0")
        except ValueError:
            declared = -1
        if declared < 0:
            return problem_http_response(400, "The Content-Length header is not a valid length.")
        if declared > limit:
            return _too_large(limit)
        try:
            received = len(request.body)  # bounded: Django refuses beyond DATA_UPLOAD_MAX_MEMORY_SIZE
        except RequestDataTooBig:
            return _too_large(limit)
        if received > limit:
            return _too_large(limit)
        return None


def _read_undeclared_body(request: WSGIRequest, limit: int) -> HttpResponse | None:
    """A WSGI body sent without Content-Length (chunked): read it whole if the server allows, within the limit."""
    if not request.environ.get("wsgi.input_terminated"):
        return problem_http_response(
            411, "Send the body with a Content-Length header: this server cannot read a chunked body."
        )
    stream = request.environ["wsgi.input"]
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(min(64 * 1024, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        return _too_large(limit)
    body = b"".join(chunks)
    request._stream = io.BytesIO(body)  # what Django and DRF read from here on, as if the length had been sent
    request.META["CONTENT_LENGTH"] = str(len(body))
    return None
