"""SMS and voice through a fake Twilio-compatible provider on loopback."""

import logging

import pytest

from integrations.application.channels import sms_channel, voice_channel
from integrations.domain.channels import failure_details
from integrations.infrastructure.console import ConsoleSmsChannel, ConsoleVoiceChannel
from integrations.infrastructure.twilio import TwilioSmsChannel, TwilioVoiceChannel
from kernel.failures import (
    AuthFailure,
    NetworkFailure,
    RateLimited,
    ServerFailure,
    TimeoutFailure,
    ValidationFailure,
    classify,
)
from tests.integration.integrations.servers import closed_port


def test_console_is_the_default(settings):
    settings.SMS_PROVIDER = "console"
    settings.VOICE_PROVIDER = ""
    assert isinstance(sms_channel(), ConsoleSmsChannel)
    assert isinstance(voice_channel(), ConsoleVoiceChannel)
    assert sms_channel().send_sms(to="+15550100001", body="hi").provider == "console"


def test_voice_follows_sms_unless_set(twilio_settings):
    assert isinstance(sms_channel(), TwilioSmsChannel)
    assert isinstance(voice_channel(), TwilioVoiceChannel)
    twilio_settings.VOICE_PROVIDER = "console"
    assert isinstance(voice_channel(), ConsoleVoiceChannel)


def test_an_unknown_provider_is_a_configuration_error(settings):
    from django.core.exceptions import ImproperlyConfigured

    settings.SMS_PROVIDER = "carrier-pigeon"
    with pytest.raises(ImproperlyConfigured, match="SMS_PROVIDER must be one of console, twilio"):
        sms_channel()


def test_sms_is_posted_form_encoded_with_basic_auth(twilio_settings, fake_twilio):
    result = sms_channel().send_sms(to="+1 (555) 010-0001", body="Your code is 1234", account_id=1)

    (recorded,) = fake_twilio.requests
    assert recorded.method == "POST"
    assert recorded.path == f"/2010-04-01/Accounts/{fake_twilio.account_sid}/Messages.json"
    assert recorded.header("Content-Type") == "application/x-www-form-urlencoded"
    assert recorded.form == {"To": ["+15550100001"], "From": ["+15550100000"], "Body": ["Your code is 1234"]}
    assert result.channel == "sms"
    assert result.provider == "twilio"
    assert result.message_id.startswith("SM")
    assert result.status == "queued"
    data = result.as_response_data()
    assert data["message_id"] == result.message_id
    assert data["num_segments"] == "1"
    assert data["duration_ms"] > 0


def test_a_call_reads_the_message_or_plays_the_recording(twilio_settings, fake_twilio):
    spoken = voice_channel().place_call(to="+15550100002", message="Your table is ready & waiting")
    played = voice_channel().place_call(to="+15550100002", recording_url="https://cdn.example/hello.mp3")
    first, second = fake_twilio.requests
    assert first.path.endswith("/Calls.json")
    assert first.form["Twiml"] == ["<Response><Say>Your table is ready &amp; waiting</Say></Response>"]
    assert second.form["Twiml"] == ["<Response><Play>https://cdn.example/hello.mp3</Play></Response>"]
    assert spoken.channel == "voice"
    assert spoken.message_id.startswith("CA")
    assert played.message_id != spoken.message_id


@pytest.mark.parametrize(
    ("to", "kind", "retryable"),
    [
        ("+15550000429", RateLimited, True),
        ("+15550000500", ServerFailure, True),
        ("+15550000400", ValidationFailure, False),
    ],
)
def test_provider_answers_are_classified(twilio_settings, fake_twilio, to, kind, retryable):
    with pytest.raises(kind) as raised:
        sms_channel().send_sms(to=to, body="hello")
    assert classify(raised.value).retryable is retryable
    details = failure_details(raised.value)
    assert details["provider"] == "twilio"
    assert details["status_code"] in (429, 500, 400)
    assert to not in str(raised.value)  # Twilio's message names the number; ours does not repeat it


def test_rate_limit_keeps_retry_after(twilio_settings, fake_twilio):
    with pytest.raises(RateLimited) as raised:
        sms_channel().send_sms(to="+15550000429", body="hello")
    assert raised.value.retry_after == 9.0
    assert str(raised.value) == "twilio answered 429 (error 20429)"


def test_a_400_names_twilio_s_error_code(twilio_settings, fake_twilio):
    with pytest.raises(ValidationFailure, match=r"^twilio answered 400 \(error 21211\)$") as raised:
        sms_channel().send_sms(to="+15550000400", body="hello")
    assert failure_details(raised.value)["error_code"] == 21211


def test_wrong_credentials_are_an_auth_failure_that_never_shows_them(twilio_settings, fake_twilio, caplog):
    caplog.set_level(logging.DEBUG)
    twilio_settings.TWILIO_AUTH_TOKEN = "wrong-token-canary-91"
    with pytest.raises(AuthFailure) as raised:
        sms_channel().send_sms(to="+15550100001", body="hello")
    assert not classify(raised.value).retryable
    assert "wrong-token-canary-91" not in str(raised.value) + caplog.text
    assert fake_twilio.account_sid not in str(raised.value)


def test_missing_credentials_are_named_not_shown(settings):
    settings.SMS_PROVIDER = "twilio"
    settings.TWILIO_ACCOUNT_SID = ""
    settings.TWILIO_AUTH_TOKEN = "secret-token-xyz"
    settings.TWILIO_FROM_NUMBER = ""
    with pytest.raises(AuthFailure, match="set TWILIO_ACCOUNT_SID, TWILIO_FROM_NUMBER") as raised:
        sms_channel().send_sms(to="+15550100001", body="hello")
    assert "secret-token-xyz" not in str(raised.value)


def test_a_hanging_provider_times_out(twilio_settings, fake_twilio):
    with pytest.raises(TimeoutFailure, match=r"twilio: no answer within 0\.5 s") as raised:
        sms_channel().send_sms(to="+15550000999", body="hello")
    assert failure_details(raised.value)["status_code"] is None


def test_an_unreachable_provider_is_a_network_failure(twilio_settings):
    twilio_settings.TWILIO_BASE_URL = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(NetworkFailure) as raised:
        sms_channel().send_sms(to="+15550100001", body="hello")
    assert classify(raised.value).retryable
    assert str(raised.value) == "twilio: connection failed (ConnectionError)"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"to": "5550100", "body": "x"}, "to: not a phone number in E.164 form"),
        ({"to": "", "body": "x"}, "to: not a phone number"),
        ({"to": "+15550100001", "body": "   "}, "body: must not be empty"),
        ({"to": "+15550100001", "body": "x" * 1601}, "body: longer than 1600 characters"),
    ],
)
def test_bad_sms_input_is_refused_before_calling_the_provider(twilio_settings, fake_twilio, kwargs, message):
    with pytest.raises(ValidationFailure, match=message):
        sms_channel().send_sms(**kwargs)
    assert fake_twilio.requests == []


def test_a_call_needs_a_message_or_a_recording(twilio_settings, fake_twilio):
    with pytest.raises(ValidationFailure, match="message: a call needs a message or a recording_url"):
        voice_channel().place_call(to="+15550100001")
    with pytest.raises(ValidationFailure, match="recording_url: must be an http"):
        voice_channel().place_call(to="+15550100001", recording_url="javascript:alert(1)")
    assert fake_twilio.requests == []


def test_the_log_masks_the_number(twilio_settings, fake_twilio, caplog):
    caplog.set_level(logging.INFO, logger="relay.integrations")
    sms_channel().send_sms(to="+15550100001", body="secret body text")
    assert "+15***01" in caplog.text
    assert "+15550100001" not in caplog.text
    assert "secret body text" not in caplog.text
