"""Who may call what: account roles (accounts.domain.roles) and operators (superusers).

Views declare what they need; these classes only read it:

    class ContactListView(AccountView):
        read_permission = Permission.VIEW                # GET, HEAD, OPTIONS
        write_permission = Permission.MANAGE_CONTACTS    # POST, PUT, PATCH, DELETE

A view may override `required_permission(request)` when one method needs
something else (e.g. starting a run needs RUN_WORKFLOWS).
"""

from django.core.exceptions import ImproperlyConfigured
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from accounts.domain.roles import Permission
from accounts.domain.tokens import ApiCaller

NO_ACCOUNT = "This token acts for no account; issue one with `create_api_token --account SLUG`."


def required_permission(request: Request, view) -> Permission:
    """The view's own rule if it has one, else its read/write permission by method."""
    chooser = getattr(view, "required_permission", None)
    if callable(chooser):
        return chooser(request)
    needed = view.read_permission if request.method in SAFE_METHODS else view.write_permission
    if needed is None:
        raise ImproperlyConfigured(f"{type(view).__name__} accepts {request.method} but declares no permission for it")
    return Permission(needed)


class HasAccountPermission(BasePermission):
    """An authenticated caller acting for an account whose role holds the view's permission."""

    def has_permission(self, request: Request, view) -> bool:
        caller = request.auth
        if not isinstance(caller, ApiCaller):
            return False  # DRF answers 401: no credentials were accepted
        if caller.account_id is None:
            self.message = NO_ACCOUNT
            return False
        method = (request.method or "").lower()
        if method not in view.http_method_names or not hasattr(view, method):
            return True  # a method the view does not answer: dispatch says 405, nothing runs
        needed = required_permission(request, view)
        if not caller.may(needed):
            role = caller.role.value if caller.role else "none"
            self.message = f"Your role ({role}) does not allow this: it needs the '{needed.value}' permission."
            return False
        return True


class IsOperator(BasePermission):
    """Superusers only: the operator endpoints reach across every account."""

    message = "Only operators (superusers) may use this endpoint."

    def has_permission(self, request: Request, view) -> bool:
        return isinstance(request.auth, ApiCaller) and request.auth.is_superuser and request.user.is_superuser
