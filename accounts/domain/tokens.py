"""API tokens: how they are minted, shown and recognised. Plain Python.

A token is `rly_` followed by 43 URL-safe characters (256 random bits). Only
its SHA-256 is stored: a high-entropy secret needs no slow, salted hash, and a
plain digest lets the lookup use a unique index. The first 12 characters (the
`rly_` marker and 8 random ones) are kept in clear as the token's *prefix*, so
people can tell tokens apart in lists and logs without seeing the secret. The
marker also lets secret scanners spot a leaked token.
"""

import hashlib
import secrets
from dataclasses import dataclass

from accounts.domain.roles import Permission, Role, role_allows

TOKEN_MARKER = "rly_"  # noqa: S105 - the public marker, not a secret
PREFIX_LENGTH = 12  # marker + 8 random characters
_SECRET_BYTES = 32
MAX_TOKEN_LENGTH = 200  # anything longer is not one of ours; refused before hashing


@dataclass(frozen=True)
class MintedToken:
    """A new token: `secret` is shown once and never stored."""

    secret: str
    prefix: str
    key_hash: str


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def mint_token() -> MintedToken:
    secret = TOKEN_MARKER + secrets.token_urlsafe(_SECRET_BYTES)
    return MintedToken(secret=secret, prefix=secret[:PREFIX_LENGTH], key_hash=hash_token(secret))


def looks_like_token(candidate: str) -> bool:
    """Cheap shape check, so garbage never reaches the database."""
    return (
        candidate.startswith(TOKEN_MARKER)
        and PREFIX_LENGTH < len(candidate) <= MAX_TOKEN_LENGTH
        and candidate.isascii()
        and candidate.isprintable()
    )


@dataclass(frozen=True)
class ApiCaller:
    """Who a request acts as: the token's user, for the token's account, in their current role.

    The role is read at every request, so a demoted or removed member loses
    access at once. Superusers are superadmins: in the account their token
    acts for they may do anything an owner may.
    """

    token_id: int
    token_prefix: str
    user_id: int
    account_id: int | None  # None: an operator token, for the operator endpoints only
    role: Role | None
    is_superuser: bool

    def may(self, permission: Permission | str) -> bool:
        if self.account_id is None:
            return False
        if self.is_superuser:
            return True
        return self.role is not None and role_allows(self.role, permission)
