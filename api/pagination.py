"""Cursor pagination: newest first, stable under inserts, page size capped.

    GET /api/v1/contacts?page_size=50
    {"next": "https://.../api/v1/contacts?cursor=cD0y...&page_size=50", "previous": null, "results": [...]}

A view sets `ordering` (default newest first by `created_at`); the cursor
encodes the position, so new rows never shift a page. A cursor that does
not decode, or a page size that is not a positive integer, is a 400; a
page size above API_MAX_PAGE_SIZE is capped to it.
"""

import binascii
from base64 import b64decode
from urllib.parse import parse_qs

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.exceptions import NotFound as DRFNotFound
from rest_framework.pagination import CursorPagination

from api.problems import InvalidInput
from api.serializers import CHECKED


class ApiCursorPagination(CursorPagination):
    cursor_query_param = "cursor"
    cursor_query_description = "Opaque cursor from a previous page's `next` or `previous` link."
    page_size_query_param = "page_size"
    page_size_query_description = "Items per page (default 50, at most 200)."
    ordering = ("-created_at", "-id")

    @property
    def query_params(self) -> tuple[str, str]:
        return (self.cursor_query_param, self.page_size_query_param)

    def get_page_size(self, request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        default = settings.API_PAGE_SIZE
        if raw is None:
            return default
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if size < 1:
            raise InvalidInput.field(self.page_size_query_param, "must be a positive integer")
        return min(size, settings.API_MAX_PAGE_SIZE)

    def decode_cursor(self, request):
        """DRF's decoder skips what is not base64, so `!!!` read as no position at all: the first page. A cursor
        is only ever one this API wrote: strict base64 of its own keys (o, r, p), each once."""
        encoded = request.query_params.get(self.cursor_query_param)
        if encoded:
            try:
                tokens = parse_qs(
                    b64decode(encoded.encode("ascii"), validate=True).decode("ascii"),
                    keep_blank_values=True,
                    strict_parsing=True,
                )
            except (binascii.Error, UnicodeError, ValueError):
                tokens = {}
            if not tokens or set(tokens) - {"o", "r", "p"} or any(len(values) != 1 for values in tokens.values()):
                raise InvalidInput.field(self.cursor_query_param, "is not a valid cursor")
        return super().decode_cursor(request)

    def get_ordering(self, request, queryset, view):
        return tuple(getattr(view, "ordering", None) or self.ordering)

    def paginate_queryset(self, queryset, request, view=None):
        try:
            return super().paginate_queryset(queryset, request, view)
        except (DRFNotFound, DjangoValidationError, ValueError, TypeError, OverflowError):
            # DRF answers a bad cursor 404; a tampered position fails when the query is built.
            raise InvalidInput.field(self.cursor_query_param, "is not a valid cursor") from None

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1}
            if parameter["name"] == self.cursor_query_param:
                parameter["schema"] = {"type": "string", CHECKED: "only a cursor this API wrote is valid"}
        return parameters
