"""The account's sending settings page, as a marketer uses it: a window per channel (a legal preset by name, or
custom days and hours, holidays), caps as rows, what happens over a cap; stored as the rules read it, shown
back as it was set, every mistake next to the field it is about. Only the account's own, only for roles that
build its messages."""

import pytest
from django.urls import reverse

from integrations.application.sending_rules import account_sending_settings
from integrations.domain.sending import Channel
from integrations.infrastructure.models import SendingSettings
from tests.factories import AccountFactory, MembershipFactory, UserFactory
from workflows.admin_roles import grant_role

pytestmark = pytest.mark.django_db

ADD = reverse("admin:integrations_sendingsettings_add")


def as_role(client, account, role: str):
    user = UserFactory()
    MembershipFactory(account=account, user=user, role=role)
    grant_role(user, role)
    client.force_login(user)
    return client


def filled(account, **fields) -> dict:
    """The form as posted: every window not set, no caps, wait when capped; `fields` change it."""
    data = {"account": account.pk, "when_capped": "defer"}
    for channel in ("email", "sms", "voice"):
        data[f"{channel}_window"] = ""
    for i in range(5):
        data |= {f"cap{i}_unit": "days", f"cap{i}_channel": "all"}
    return data | fields


def test_a_marketer_sets_windows_by_preset_and_by_hand_and_caps_and_reads_them_back(client, account):
    marketer = as_role(client, account, "marketer")
    response = marketer.post(
        ADD,
        filled(
            account,
            email_window="custom",
            email_days=["mon", "tue", "wed", "thu", "fri"],
            email_hours="09:00-13:00, 14:00-20:00",
            email_holidays="2026-12-24\n2026-12-31",
            sms_window="fr",
            sms_spread="10",
            voice_window="none",
            cap0_max="3",
            cap0_every="1",
            cap0_unit="days",
            cap1_max="1",
            cap1_every="24",
            cap1_unit="hours",
            cap1_channel="sms",
            cap1_transactional="on",
            when_capped="skip",
        ),
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    row = SendingSettings.objects.get(account=account)
    assert row.send_windows == {
        "email": {
            "days": ["mon", "tue", "wed", "thu", "fri"],
            "hours": ["09:00-13:00", "14:00-20:00"],
            "holidays": ["2026-12-24", "2026-12-31"],
        },
        "sms": {"preset": "fr", "spread": 600},
        "voice": None,
    }
    assert row.frequency_caps == [
        {"max": 3, "days": 1},
        {"max": 1, "hours": 24, "channel": "sms", "include_transactional": True},
    ]
    assert row.when_capped == "skip"
    rules = account_sending_settings(account_id=account.pk)  # what the rules read: exactly this
    assert len(rules.caps) == 2
    assert (rules.window(Channel.SMS).name, rules.window(Channel.SMS).spread_seconds) == ("fr", 600)
    assert rules.window(Channel.VOICE) is None

    page = marketer.get(reverse("admin:integrations_sendingsettings_change", args=[row.pk])).content.decode()
    assert "Email: Mon-Fri 09:00-13:00, 14:00-20:00, not on 2 listed holidays" in page  # what is in force
    assert "SMS: Mon-Sat 08:00-22:00, not on FR public holidays" in page
    assert "Voice calls: any time" in page
    assert 'name="email_hours" value="09:00-13:00, 14:00-20:00"' in page  # shown back as set
    assert '<option value="fr" selected>' in page
    assert 'name="cap1_every" value="24"' in page


def test_every_mistake_is_next_to_its_field_and_nothing_is_stored(client, account):
    marketer = as_role(client, account, "marketer")
    response = marketer.post(
        ADD,
        filled(
            account,
            email_window="custom",
            email_days=[],
            email_hours="09:00-13:00, 9-5",
            email_holidays="2026-02-30",
            sms_window="custom",
            sms_days=["sat", "sun"],
            sms_hours="20:00-08:00",
            cap0_max="3",
        ),
    )
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form.errors["email_days"] == ["Tick at least one day for a custom window."]
    assert form.errors["email_hours"] == [
        'Item 2: must be hours as "HH:MM-HH:MM" on a 24-hour clock (end 24:00 for midnight)'
    ]
    assert form.errors["email_holidays"] == ["Must be a date as YYYY-MM-DD"]
    assert form.errors["sms_hours"][0].startswith("Must end after it starts")
    assert "hours" in form.errors["cap0_every"][0]  # a cap needs its period
    assert not SendingSettings.objects.filter(account=account).exists()


def test_a_viewer_reads_the_settings_but_cannot_change_them_and_no_one_sees_another_accounts(client, account):
    mine = SendingSettings.objects.create(account=account, send_windows={"sms": "us_fl"})
    theirs = SendingSettings.objects.create(account=AccountFactory(), send_windows={"sms": "fr"})
    viewer = as_role(client, account, "viewer")
    page = viewer.get(reverse("admin:integrations_sendingsettings_change", args=[mine.pk]))
    assert page.status_code == 200
    assert "SMS: every day 08:00-20:00" in page.content.decode()
    assert viewer.post(ADD, filled(account, sms_window="none")).status_code == 403
    assert viewer.get(reverse("admin:integrations_sendingsettings_change", args=[theirs.pk])).status_code == 302
