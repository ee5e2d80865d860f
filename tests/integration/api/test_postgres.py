"""What the API relies on that only PostgreSQL does."""

import pytest

from contacts.application.selectors import contact_list
from tests.factories import ContactFactory
from tests.integration.api.conftest import assert_problem


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_tag_filter_is_jsonb_containment_of_whole_tags(account):
    vip = ContactFactory(account=account, tags=["vip"])
    ContactFactory(account=account, tags=["vip-lapsed", "trial"])
    query = contact_list(account_id=account.pk, tag="VIP")
    assert "@>" in str(query.query)  # the containment operator, which a GIN index on tags can serve
    assert list(query) == [vip]


@pytest.mark.postgres
@pytest.mark.django_db
def test_offsets_postgresql_refuses_are_converted_before_the_query(owner_api, account):
    """PostgreSQL rejects UTC offsets beyond 15:59 that Python accepts; filters are sent in UTC."""
    ContactFactory(account=account)
    response = owner_api.get("/api/v1/contacts?created_after=2000-01-01T00:00:00%2B16:50")
    assert response.status_code == 200, response.content
    assert len(response.json()["results"]) == 1
    assert_problem(owner_api.get("/api/v1/contacts?created_after=0001-01-01T00:00:00%2B05:00"), 400)
