"""Token minting and the caller's permissions: plain Python, no database."""

import pytest

from accounts.domain.roles import Permission, Role
from accounts.domain.tokens import PREFIX_LENGTH, ApiCaller, hash_token, looks_like_token, mint_token


def test_a_minted_token_is_random_marked_and_only_its_hash_is_kept():
    first, second = mint_token(), mint_token()
    assert first.secret != second.secret
    assert first.secret.startswith("rly_")
    assert len(first.secret) == 4 + 43  # 256 random bits, URL-safe
    assert first.prefix == first.secret[:PREFIX_LENGTH]
    assert first.key_hash == hash_token(first.secret)
    assert len(first.key_hash) == 64
    assert first.secret not in first.key_hash


def test_looks_like_token():
    assert looks_like_token(mint_token().secret)
    for bad in ("", "rly_", "rly_short", "abc_" + "x" * 40, "rly_" + "x" * 300, "rly_" + "é" * 20, "rly_\x00" * 5):
        assert not looks_like_token(bad), bad


def caller(role: Role | None, *, account_id: int | None = 1, superuser: bool = False) -> ApiCaller:
    return ApiCaller(
        token_id=1, token_prefix="rly_abcdefgh", user_id=1, account_id=account_id, role=role, is_superuser=superuser
    )


@pytest.mark.parametrize(
    ("role", "permission", "allowed"),
    [
        (Role.VIEWER, Permission.VIEW, True),
        (Role.VIEWER, Permission.MANAGE_CONTACTS, False),
        (Role.MARKETER, Permission.MANAGE_CONTACTS, True),
        (Role.MARKETER, Permission.RUN_WORKFLOWS, True),
        (Role.MARKETER, Permission.VIEW_JOBS, False),
        (Role.ADMIN, Permission.VIEW_JOBS, True),
        (Role.OWNER, Permission.MANAGE_ACCOUNT, True),
        (None, Permission.VIEW, False),
    ],
)
def test_a_caller_may_what_its_role_allows(role, permission, allowed):
    assert caller(role).may(permission) is allowed


def test_a_superuser_may_anything_in_the_account_it_acts_for():
    assert caller(None, superuser=True).may(Permission.VIEW_JOBS)


def test_a_token_for_no_account_may_nothing_in_an_account():
    assert not caller(None, account_id=None, superuser=True).may(Permission.VIEW)
