"""Bearer tokens: who gets in, who gets 401, and what is stored."""

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.application.tokens import LAST_USED_RESOLUTION, api_token_create, api_token_revoke
from accounts.domain.errors import AccountError
from accounts.domain.tokens import hash_token
from accounts.models import Account, ApiToken, Membership
from tests.factories import MembershipFactory, UserFactory
from tests.integration.api.conftest import assert_problem, client_for

pytestmark = pytest.mark.django_db

CONTACTS = "/api/v1/contacts"


def test_a_valid_token_reaches_the_api(owner_api):
    assert owner_api.get(CONTACTS).status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Basic dXNlcjpwYXNz",  # another scheme is not ours: not authenticated
    ],
)
def test_no_bearer_credentials_is_401_with_a_challenge(client, header):
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    response = client.get(CONTACTS, **extra)
    body = assert_problem(response, 401)
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'
    assert body["detail"] == "Authentication credentials were not provided."


@pytest.mark.parametrize(
    "header",
    [
        "Bearer rly_thisisnotatokenthatexistsanywhere000000000000",
        "Bearer not-even-shaped-like-one",
        "Bearer",
        "Bearer two parts",
        "Bearer rly_\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9",
    ],
)
def test_a_bad_token_is_401(client, header, owner_api):
    response = client.get(CONTACTS, HTTP_AUTHORIZATION=header)
    assert_problem(response, 401)
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'


def test_a_revoked_token_is_401_at_once(owner_api):
    assert owner_api.get(CONTACTS).status_code == 200
    api_token_revoke(token_id=owner_api.token_id)
    body = assert_problem(owner_api.get(CONTACTS), 401)
    assert body["detail"] == "Invalid or revoked token."


def test_an_inactive_user_token_is_401(owner_api):
    owner_api.user.is_active = False
    owner_api.user.save(update_fields=["is_active"])
    assert_problem(owner_api.get(CONTACTS), 401)


def test_a_member_removed_from_the_account_loses_access(owner_api, account):
    Membership.objects.filter(user=owner_api.user, account=account).delete()
    assert_problem(owner_api.get(CONTACTS), 401)


def test_a_role_change_applies_at_the_next_request(owner_api, account):
    assert owner_api.get("/api/v1/jobs").status_code == 200
    Membership.objects.filter(user=owner_api.user, account=account).update(role="viewer")
    assert_problem(owner_api.get("/api/v1/jobs"), 403)


def test_only_the_hash_and_a_short_prefix_are_stored(owner):
    account = owner.memberships.get().account
    token, secret = api_token_create(user_id=owner.pk, account_id=account.pk, name="crm")
    token.refresh_from_db()
    assert secret.startswith("rly_")
    assert len(secret) > 40
    assert token.key_hash == hash_token(secret)
    assert token.prefix == secret[:12]
    stored = " ".join(str(v) for v in ApiToken.objects.filter(pk=token.pk).values().get().values())
    assert secret not in stored
    assert secret[12:] not in stored


def test_last_used_is_written_at_most_once_a_minute(owner_api):
    owner_api.get(CONTACTS)
    token = ApiToken.objects.get(pk=owner_api.token_id)
    first = token.last_used_at
    assert first is not None
    owner_api.get(CONTACTS)
    token.refresh_from_db()
    assert token.last_used_at == first  # within the minute: no write
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - LAST_USED_RESOLUTION - timedelta(seconds=1))
    owner_api.get(CONTACTS)
    token.refresh_from_db()
    assert token.last_used_at > first - timedelta(seconds=1)


def test_a_token_needs_membership_unless_superuser(account, superuser):
    outsider = UserFactory()
    with pytest.raises(AccountError) as refused:
        api_token_create(user_id=outsider.pk, account_id=account.pk)
    assert refused.value.field == "account"
    with pytest.raises(AccountError):
        api_token_create(user_id=outsider.pk, account_id=None)
    token, _ = api_token_create(user_id=superuser.pk, account_id=account.pk)
    assert token.account_id == account.pk


def test_superuser_acting_for_an_account_may_do_what_an_owner_may(superuser, account, contact):
    api = client_for(superuser, account)
    assert api.get(f"/api/v1/contacts/{contact.pk}").status_code == 200
    assert api.get("/api/v1/jobs").status_code == 200


def test_an_operator_token_reaches_no_account_endpoint(operator_api):
    body = assert_problem(operator_api.get(CONTACTS), 403)
    assert "acts for no account" in body["detail"]


def test_a_demoted_superuser_loses_an_operator_token(operator_api, superuser):
    superuser.is_superuser = False
    superuser.save(update_fields=["is_superuser"])
    assert_problem(operator_api.get("/api/v1/admin/jobs"), 401)


# --- Management commands ------------------------------------------------------------------


def test_create_api_token_prints_a_working_token_once(capsys, owner, account, client):
    call_command("create_api_token", owner.username, "--name", "crm-sync")
    out, err = capsys.readouterr()
    secret = out.strip()
    assert secret.startswith("rly_")
    assert secret not in err
    assert secret[:12] in err
    assert account.slug in err
    token = ApiToken.objects.get(prefix=secret[:12])
    assert (token.user_id, token.account_id, token.name) == (owner.pk, account.pk, "crm-sync")
    assert client.get(CONTACTS, HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 200


def test_create_api_token_needs_an_account_when_the_user_has_several(capsys, owner, account, other_account):
    MembershipFactory(account=other_account, user=owner, role="viewer")
    with pytest.raises(CommandError, match="several accounts"):
        call_command("create_api_token", owner.username)
    call_command("create_api_token", owner.username, "--account", other_account.slug)
    assert ApiToken.objects.get(user=owner).account_id == other_account.pk


def test_create_api_token_refuses_unknown_users_and_accounts(owner):
    with pytest.raises(CommandError, match="No user named"):
        call_command("create_api_token", "nobody")
    with pytest.raises(CommandError, match="no account with slug"):
        call_command("create_api_token", owner.username, "--account", "missing")
    assert not ApiToken.objects.exists()


def test_a_superuser_without_account_gets_an_operator_token(capsys, superuser):
    call_command("create_api_token", superuser.username)
    assert "operator" in capsys.readouterr().err
    assert ApiToken.objects.get(user=superuser).account_id is None


def test_revoke_api_token_by_prefix(capsys, owner_api):
    prefix = owner_api.token[:12]
    call_command("revoke_api_token", prefix)
    assert "revoked" in capsys.readouterr().out
    assert ApiToken.objects.get(pk=owner_api.token_id).revoked_at is not None
    assert_problem(owner_api.get(CONTACTS), 401)
    with pytest.raises(CommandError):
        call_command("revoke_api_token", "rly_missing0")


def test_create_account_makes_the_owner_and_a_unique_slug(capsys):
    user = UserFactory(username="ada")
    call_command("create_account", "Acme Corp", "--owner", "ada")
    call_command("create_account", "Acme Corp", "--owner", "ada")
    slugs = capsys.readouterr().out.split()
    assert slugs == ["acme-corp", "acme-corp-2"]
    for slug in slugs:
        account = Account.objects.get(slug=slug)
        assert account.name == "Acme Corp"
        assert Membership.objects.get(account=account).user == user
        assert Membership.objects.get(account=account).role == "owner"


def test_create_account_refuses_a_missing_owner_unless_asked_to_create_it(capsys):
    with pytest.raises(CommandError, match="No user named 'bot'"):
        call_command("create_account", "Acme", "--owner", "bot")
    assert not Account.objects.exists()
    call_command("create_account", "Acme", "--owner", "bot", "--create-owner")
    membership = Membership.objects.get(account__slug="acme")
    assert membership.user.username == "bot"
    assert not membership.user.has_usable_password()


def test_create_account_refuses_a_taken_explicit_slug():
    UserFactory(username="ada")
    call_command("create_account", "Acme", "--owner", "ada", "--slug", "acme")
    with pytest.raises(CommandError, match="taken"):
        call_command("create_account", "Other", "--owner", "ada", "--slug", "acme")
    assert Account.objects.count() == 1


def test_the_admin_revokes_tokens(client, superuser, owner_api):
    client.force_login(superuser)
    response = client.post(
        "/admin/accounts/apitoken/",
        {"action": "revoke_tokens", "_selected_action": [owner_api.token_id]},
    )
    assert response.status_code == 302
    assert ApiToken.objects.get(pk=owner_api.token_id).revoked_at is not None
    page = client.get("/admin/accounts/apitoken/")
    assert page.status_code == 200
    assert owner_api.token not in page.content.decode()


def test_revoking_twice_keeps_the_first_time(owner_api):
    first = api_token_revoke(token_id=owner_api.token_id).revoked_at
    ApiToken.objects.filter(pk=owner_api.token_id).update(revoked_at=first)
    later = api_token_revoke(token_id=owner_api.token_id).revoked_at
    assert later == first
    assert first <= timezone.now()
