"""Requests refused before any view runs, outside the REST API (which refuses the same things itself)."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest

from api.problems import is_api_request
from kernel.storable_text import NUL_REASON, field_with_nul, has_nul


class RefuseNulMiddleware:
    """400 naming the field for a NUL in the path, a query parameter or a form field.

    One check for every page that takes form-encoded text: the admin (its forms, its list filters, such as
    `?status=%00`, which reached PostgreSQL as a 500), the provider webhooks (a signed inbound SMS whose
    `Body` held a NUL was a 500), the unsubscribe page. Nothing has run when it refuses, so nothing is half
    written. Under /api/ the API's own parser, filters and path converters answer in its problem format.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not is_api_request(request):
            where = _where_a_nul_is(request)
            if where:
                return HttpResponseBadRequest(f"{where} {NUL_REASON}.", content_type="text/plain; charset=utf-8")
        return self.get_response(request)


def _where_a_nul_is(request: HttpRequest) -> str:
    if has_nul(request.path):
        return "The address"
    name = field_with_nul(request.GET.lists())
    if name is not None:
        return f"The query parameter “{name}”"
    if request.method != "POST":
        return ""
    name = field_with_nul(request.POST.lists())  # an uploaded file's name: Django drops unprintables itself
    return "" if name is None else f"The form field “{name}”"
