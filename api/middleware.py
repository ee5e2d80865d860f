"""The body size limit for the API, applied before any view or parser reads the body."""

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
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
        raw_length = request.META.get("CONTENT_LENGTH") or "0"
        try:
            declared = int(raw_length)
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
