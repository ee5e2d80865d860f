"""`Authorization: Bearer <token>` for the REST API."""

from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from accounts.application.tokens import api_token_authenticate

INVALID_TOKEN = "Invalid or revoked token."  # noqa: S105 - a message, not a secret; one message: unknown and revoked look alike


class BearerTokenAuthentication(BaseAuthentication):
    """Sets `request.user` to the token's user and `request.auth` to an ApiCaller.

    No header (or another scheme) is "not authenticated" (401 from the
    permission check); a Bearer header with a bad token is refused here (401).
    """

    keyword = "Bearer"

    def authenticate(self, request: Request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: expected 'Bearer <token>'.")
        try:
            secret = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed(INVALID_TOKEN) from None
        found = api_token_authenticate(secret=secret)
        if found is None:
            raise exceptions.AuthenticationFailed(INVALID_TOKEN)
        return found

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'
