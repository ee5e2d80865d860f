"""SMS consent keywords, phone numbers, and Twilio's request signature."""

import pytest

from integrations.domain.sms import (
    OPT_IN_KEYWORDS,
    OPT_OUT_KEYWORDS,
    SmsConsentCommand,
    consent_keyword,
    is_e164,
    mask_email,
    mask_phone,
    normalize_phone,
)
from integrations.infrastructure.twilio import call_twiml, signature_is_valid, twilio_signature
from kernel.failures import ValidationFailure


@pytest.mark.parametrize("keyword", sorted(OPT_OUT_KEYWORDS))
@pytest.mark.parametrize("spelling", [str.upper, str.lower, str.title, lambda k: f"  {k}\n"])
def test_every_opt_out_keyword_in_any_case_with_spaces(keyword, spelling):
    assert consent_keyword(spelling(keyword)) == (SmsConsentCommand.OPT_OUT, keyword)


@pytest.mark.parametrize("body", ["START", "start", " Unstop ", "UNSTOP"])
def test_opt_in_keywords(body):
    command, keyword = consent_keyword(body)
    assert command is SmsConsentCommand.OPT_IN
    assert keyword in OPT_IN_KEYWORDS


def test_inner_spaces_of_opt_out_are_collapsed():
    assert consent_keyword("opt   out") == (SmsConsentCommand.OPT_OUT, "OPT OUT")


@pytest.mark.parametrize("body", ["", None, "stop sending me deals", "STOP.", "please stop", "HELP", "optout", "yes"])
def test_anything_else_is_not_a_keyword(body):
    assert consent_keyword(body) is None


def test_phone_numbers():
    assert normalize_phone(" +1 (555) 010-0000 ") == "+15550100000"
    assert normalize_phone("15550100000") == "15550100000"
    assert normalize_phone("+44 (0)20 7946 0000") == "+442079460000"  # as contacts store it
    assert normalize_phone("ext. 12-34") == "1234"  # no phone number: its digits, as before
    assert is_e164("+15550100000")
    assert not is_e164("5550100")
    assert not is_e164("+0555")
    assert mask_phone("+15550100000") == "+15***00"
    assert mask_email("ada@example.com") == "a***@example.com"
    assert mask_email("") == "***"


def test_twilio_signature_matches_twilios_documented_example():
    params = {
        "CallSid": ["CA1234567890ABCDE"],
        "Caller": ["+14158675310"],
        "Digits": ["1234"],
        "From": ["+14158675310"],
        "To": ["+18005551212"],
    }
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    assert twilio_signature("12345", url, params) == "GvWf1cFY/Q7PnoempGyD5oXAezc="
    assert signature_is_valid(auth_token="12345", signature="GvWf1cFY/Q7PnoempGyD5oXAezc=", urls=[url], params=params)
    assert not signature_is_valid(
        auth_token="54321", signature="GvWf1cFY/Q7PnoempGyD5oXAezc=", urls=[url], params=params
    )
    tampered = {**params, "Digits": ["9999"]}
    assert not signature_is_valid(
        auth_token="12345", signature="GvWf1cFY/Q7PnoempGyD5oXAezc=", urls=[url], params=tampered
    )
    assert not signature_is_valid(auth_token="12345", signature="", urls=[url], params=params)


def test_signature_with_or_without_the_default_port():
    params = {"Body": ["STOP"]}
    signed_with_port = twilio_signature("tok", "https://relay.example:443/hooks/twilio/sms/", params)
    assert signature_is_valid(
        auth_token="tok", signature=signed_with_port, urls=["https://relay.example/hooks/twilio/sms/"], params=params
    )


def test_call_twiml_escapes_and_checks():
    assert call_twiml("Tom & Jerry <3", None) == "<Response><Say>Tom &amp; Jerry &lt;3</Say></Response>"
    assert call_twiml(None, "https://cdn.example/a.mp3?x=1&y=2") == (
        "<Response><Play>https://cdn.example/a.mp3?x=1&amp;y=2</Play></Response>"
    )
    with pytest.raises(ValidationFailure, match="recording_url"):
        call_twiml(None, "file:///etc/passwd")
    with pytest.raises(ValidationFailure, match="message"):
        call_twiml("  ", None)


def test_a_reply_belongs_to_the_contact_last_texted_from_its_number_whatever_was_updated_since():
    from datetime import UTC, datetime, timedelta

    from integrations.domain.sms import ReplyCandidate, reply_recipient

    t = datetime(2026, 12, 1, tzinfo=UTC)
    texted_long_ago = ReplyCandidate(1, account_id=10, updated_at=t, texted_at=t - timedelta(days=30))
    texted_lately = ReplyCandidate(2, account_id=20, updated_at=t, texted_at=t - timedelta(days=1))
    updated_lately = ReplyCandidate(3, account_id=10, updated_at=t + timedelta(days=1))
    assert reply_recipient([texted_long_ago, updated_lately]) == texted_long_ago
    assert reply_recipient([texted_long_ago, texted_lately, updated_lately]) == texted_lately  # the last message
    # nobody texted: the most recently updated, within one account only
    older = ReplyCandidate(4, account_id=10, updated_at=t)
    assert reply_recipient([older, updated_lately]) == updated_lately
    assert reply_recipient([older, ReplyCandidate(5, account_id=20, updated_at=t)]) is None
    assert reply_recipient([]) is None
