"""Frequency caps are exact under concurrency: ten senders at once to one contact never pass the cap.

Each sender is a thread with its own database connection, released together by a barrier, so their
transactions overlap on PostgreSQL under READ COMMITTED: without the contact's row lock, several would count
the same snapshot and all insert (this test then fails: more than `max` rows sent)."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from integrations.application.outbound import Deferred, Sent, send_message
from integrations.application.sending_rules import sending_settings_set
from integrations.domain.channels import EmailMessage
from integrations.infrastructure.models import OutboundMessage
from tests.factories import ContactFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

SENDERS = 10


def send_together(contact, keys: list[str]) -> list[object]:
    barrier = threading.Barrier(len(keys))
    outcomes: list[object] = [None] * len(keys)

    def sender(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            outcomes[i] = send_message(
                key=keys[i],
                content=EmailMessage(to=contact.email, subject=f"Offer {i}", text="Hi", from_email="s@shop.example"),
                account_id=contact.account_id,
                contact_id=contact.pk,
            )
        except Exception as exc:  # reported by the assertion below
            outcomes[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=sender, args=(i,)) for i in range(len(keys))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return outcomes


@pytest.mark.parametrize("limit", [1, 3])
def test_ten_concurrent_senders_to_one_contact_never_pass_the_cap(settings, account, limit):
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    sending_settings_set(account_id=account.pk, frequency_caps=[{"max": limit, "hours": 24}])
    for round_ in range(5):
        contact = ContactFactory(account=account)
        outcomes = send_together(contact, [f"r{round_}-l{limit}-{i}" for i in range(SENDERS)])
        assert not [o for o in outcomes if isinstance(o, Exception)], outcomes
        sent = [o for o in outcomes if isinstance(o, Sent)]
        deferred = [o for o in outcomes if isinstance(o, Deferred)]
        assert (len(sent), len(deferred)) == (limit, SENDERS - limit), outcomes
        counted = OutboundMessage.objects.filter(contact=contact, status="sent").count()
        assert counted == limit


def test_caps_on_two_channels_hold_together_under_concurrency(settings, account):
    """An all-channels cap and an email cap at once: the tighter one is what ten senders get."""
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    sending_settings_set(
        account_id=account.pk,
        frequency_caps=[{"max": 4, "days": 1}, {"max": 2, "hours": 1, "channel": "email"}],
    )
    contact = ContactFactory(account=account)
    outcomes = send_together(contact, [f"two-{i}" for i in range(SENDERS)])
    assert sum(isinstance(o, Sent) for o in outcomes) == 2, outcomes
