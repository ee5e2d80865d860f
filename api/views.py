"""Base classes of every API endpoint. Subclass one; keep the view thin (parse, call a service, render).

ApiView        problem details, strict JSON, per-token throttle, cursor pagination, declared filters,
               domain errors translated by `domain_errors`.
AccountView    the caller's account only: `self.account_id`; role permissions by `read_permission` /
               `write_permission` (accounts.domain.roles.Permission).
OperatorView   superusers only, across all accounts.

    class ContactDetailView(AccountView):
        write_permission = Permission.MANAGE_CONTACTS
        domain_errors = {ContactError: lambda e: InvalidInput.field(e.field, e.reason)}

        def get(self, request, contact_id):
            contact = self.scoped(contact_get, contact_id=contact_id)   # another account's: 404
            return Response(ContactOut(contact).data)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, cast

from django.core.exceptions import ObjectDoesNotExist
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from accounts.api.permissions import HasAccountPermission, IsOperator
from accounts.domain.roles import Permission
from accounts.domain.tokens import ApiCaller
from api.filters import FilterSet
from api.pagination import ApiCursorPagination
from api.problems import DomainErrorMap, NotFound

T = TypeVar("T")


class ApiView(GenericAPIView):
    pagination_class = ApiCursorPagination
    # OPTIONS and TRACE are not part of the API: 405, and not listed in Allow (the schema describes every endpoint).
    http_method_names = ["get", "post", "put", "patch", "delete", "head"]
    metadata_class = None
    ordering: ClassVar[tuple[str, ...]] = ("-created_at", "-id")  # newest first
    filters: ClassVar[FilterSet | None] = None
    # Domain error type -> the problem it is answered as. Merged along the class hierarchy (subclasses first).
    # An object that vanished between the view's lookup and the service's (a concurrent delete) is a 404.
    domain_errors: ClassVar[DomainErrorMap] = {ObjectDoesNotExist: lambda e: NotFound()}

    @property
    def caller(self) -> ApiCaller:
        return cast(ApiCaller, self.request.auth)  # BearerTokenAuthentication's: every API request has one

    def parse_filters(self) -> dict[str, Any]:
        """The declared filters given in the query string, validated (400 naming the allowed values)."""
        paginator = self.paginator
        extra = paginator.query_params if isinstance(paginator, ApiCursorPagination) else ()
        filter_set = self.filters or FilterSet()
        return filter_set.parse(dict(self.request.query_params.lists()), also_allowed=extra)

    def paginated(self, queryset, serializer_class: type[BaseSerializer]) -> Response:
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(serializer_class(page, many=True).data)


class AccountView(ApiView):
    """Everything here is the caller's account's; anything else does not exist (404)."""

    permission_classes = [HasAccountPermission]
    read_permission: ClassVar[Permission | None] = Permission.VIEW
    write_permission: ClassVar[Permission | None] = None  # set it on views that accept writes

    @property
    def account_id(self) -> int:
        return cast(int, self.caller.account_id)  # HasAccountPermission let only an account's token in

    def scoped(self, selector: Callable[..., T], **kwargs: Any) -> T:
        """Call an account-scoped selector; whatever it does not find is the same 404 as a missing object."""
        try:
            return selector(account_id=self.account_id, **kwargs)
        except ObjectDoesNotExist:
            raise NotFound() from None


class OperatorView(ApiView):
    """Operators (superusers) only; no account scoping."""

    permission_classes = [IsOperator]


def no_content() -> Response:
    return Response(status=204)
