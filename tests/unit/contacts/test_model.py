"""Tag spelling and consent, without a database."""

import pytest

from contacts.domain.model import ConsentState, ContactError, normalize_tag, with_tag, without_tag


@pytest.mark.parametrize(("raw", "tag"), [("Trial", "trial"), ("  VIP  ", "vip"), ("new lead", "new lead")])
def test_tags_are_trimmed_and_lower_case(raw, tag):
    assert normalize_tag(raw) == tag


@pytest.mark.parametrize(("raw", "reason"), [("", "blank"), ("   ", "blank"), ("x" * 65, "64"), (7, "string")])
def test_bad_tags_are_refused_with_the_reason(raw, reason):
    with pytest.raises(ContactError, match=reason) as raised:
        normalize_tag(raw)
    assert raised.value.field == "tag"


def test_adding_and_removing_tags_reports_whether_anything_changed():
    tags, added = with_tag(["a"], "B")
    assert (tags, added) == (["a", "b"], True)
    assert with_tag(tags, "b ") == (["a", "b"], False)
    assert without_tag(tags, "A") == (["b"], True)
    assert without_tag(["b"], "zzz") == (["b"], False)


def test_consent_is_per_channel_and_voice_follows_sms():
    state = ConsentState(unsubscribed=True, sms_opted_out=False)
    assert (state.allows_email(), state.allows_sms(), state.allows_voice()) == (False, True, True)
    state = ConsentState(unsubscribed=False, sms_opted_out=True)
    assert (state.allows_email(), state.allows_sms(), state.allows_voice()) == (True, False, False)
