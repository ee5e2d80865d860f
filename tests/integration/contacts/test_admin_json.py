"""The admin's JSON fields refuse what the database cannot store, as the API's parser does: a form error on
the field, never a 500 (jsonb refuses NaN and Infinity, and Python reads 1e400 as infinity)."""

import pytest
from django.urls import reverse

from contacts.models import Contact
from jobs.models import Schedule

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


def contact_form(account, **changes) -> dict:
    return {
        "account": account.pk,
        "email": "ada@example.com",
        "phone": "",
        "first_name": "",
        "last_name": "",
        "custom_fields": "{}",
        "tags": "[]",
        "consent_changes-TOTAL_FORMS": "0",
        "consent_changes-INITIAL_FORMS": "0",
        **changes,
    }


@pytest.mark.parametrize("number", ["1e400", "NaN", "-Infinity"])
def test_a_contact_with_a_custom_field_that_is_not_a_finite_number_is_a_form_error(admin_client, account, number):
    response = admin_client.post(
        reverse("admin:contacts_contact_add"), contact_form(account, custom_fields=f'{{"score": {number}}}')
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["custom_fields"] == [
        "score: must be a finite number (NaN, Infinity and numbers beyond ±1.8e308 cannot be stored)"
    ]
    assert not Contact.objects.exists()


def test_a_nul_in_a_custom_field_is_a_form_error(admin_client, account):
    response = admin_client.post(
        reverse("admin:contacts_contact_add"), contact_form(account, custom_fields='{"note": "a\\u0000b"}')
    )
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["custom_fields"] == ["note: contains a NUL character"]
    assert not Contact.objects.exists()


def test_a_schedule_payload_that_is_not_storable_is_a_form_error(admin_client):
    data = {
        "name": "nightly",
        "cron": "0 3 * * *",
        "handler": "noop",
        "payload": '{"limit": 1e400}',
        "queue": "default",
        "priority": "0",
        "enabled": "on",
    }
    response = admin_client.post(reverse("admin:jobs_schedule_add"), data)
    assert response.status_code == 200
    assert "limit: must be a finite number" in response.context["adminform"].form.errors["payload"][0]
    assert not Schedule.objects.filter(name="nightly").exists()
