"""The webhook client against a real HTTP sink on loopback: signing, classification, bounds, failure details."""

import base64
import hashlib
import hmac
import json
import time

import pytest

from integrations.application.channels import webhook_client
from integrations.application.secrets import forget_cached_secrets, webhook_secret_get_or_create, webhook_secret_rotate
from integrations.domain.channels import WebhookRequest, WebhookResponse, failure_details
from integrations.infrastructure.models import WebhookSigningSecret
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

pytestmark = pytest.mark.django_db


def independently_verified(secret: str, recorded, tolerance: int = 300) -> bool:
    """A receiver's check, written from the Standard Webhooks specification (not with Relay's code)."""
    message_id = recorded.header("webhook-id")
    timestamp = recorded.header("webhook-timestamp")
    if not message_id or not timestamp or abs(time.time() - int(timestamp)) > tolerance:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{message_id}.{timestamp}.".encode() + recorded.body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    offered = [part.split(",", 1)[1] for part in recorded.header("webhook-signature").split() if part.startswith("v1,")]
    return any(hmac.compare_digest(expected, candidate) for candidate in offered)


def send(url, **kwargs):
    return webhook_client().send(WebhookRequest(kwargs.pop("method", "POST"), url, **kwargs))


class TestDelivery:
    def test_a_2xx_returns_the_answer_and_the_request_is_signed(self, webhook_settings, http_sink, account):
        response = send(http_sink.url("/ok"), body={"event": "step.done", "n": 1}, account_id=account.id)

        assert isinstance(response, WebhookResponse)
        assert response.status_code == 200
        assert response.body == '{"ok": true}'
        assert response.duration_ms > 0
        assert response.headers["content-type"] == "application/json"
        (recorded,) = http_sink.requests
        assert recorded.method == "POST"
        assert json.loads(recorded.body) == {"event": "step.done", "n": 1}
        assert recorded.header("Content-Type") == "application/json"
        assert recorded.header("Host") == f"127.0.0.1:{http_sink.port}"
        assert recorded.header("webhook-id").startswith("msg_")
        assert response.message_id == recorded.header("webhook-id")
        secret = WebhookSigningSecret.objects.get(account=account).secret
        assert independently_verified(secret, recorded)

    def test_the_signature_fails_for_another_secret_or_an_altered_body(self, webhook_settings, http_sink, account):
        send(http_sink.url("/ok"), body={"a": 1}, account_id=account.id)
        (recorded,) = http_sink.requests
        secret = WebhookSigningSecret.objects.get(account=account).secret
        assert not independently_verified("whsec_" + base64.b64encode(b"x" * 32).decode(), recorded)
        recorded.body = b'{"a":2}'
        assert not independently_verified(secret, recorded)

    def test_each_account_signs_with_its_own_secret(self, webhook_settings, http_sink, account, other_account):
        send(http_sink.url("/ok"), body={}, account_id=account.id)
        send(http_sink.url("/ok"), body={}, account_id=other_account.id)
        mine, theirs = http_sink.requests
        assert independently_verified(webhook_secret_get_or_create(account_id=account.id).secret, mine)
        assert independently_verified(webhook_secret_get_or_create(account_id=other_account.id).secret, theirs)
        assert not independently_verified(webhook_secret_get_or_create(account_id=account.id).secret, theirs)

    def test_webhook_id_is_the_message_id_given_on_every_retry(self, webhook_settings, http_sink, account):
        url = http_sink.url("/flaky/2/same-id")
        for _ in range(2):
            with pytest.raises(ServerFailure):
                send(url, body={}, message_id="run-42-step-3", account_id=account.id)
        response = send(url, body={}, message_id="run-42-step-3", account_id=account.id)
        assert response.status_code == 200
        assert [r.header("webhook-id") for r in http_sink.requests] == ["run-42-step-3"] * 3
        assert response.message_id == "run-42-step-3"

    def test_without_an_account_the_request_is_unsigned_but_identified(self, webhook_settings, http_sink):
        send(http_sink.url("/ok"), method="GET")
        (recorded,) = http_sink.requests
        assert recorded.method == "GET"
        assert recorded.header("webhook-signature") is None
        assert recorded.header("webhook-id").startswith("msg_")
        assert recorded.header("webhook-timestamp").isdigit()

    def test_during_a_rotation_both_secrets_sign(self, webhook_settings, http_sink, account):
        old = webhook_secret_get_or_create(account_id=account.id).secret
        new = webhook_secret_rotate(account_id=account.id).secret
        send(http_sink.url("/ok"), body={}, account_id=account.id)
        recorded = http_sink.requests[-1]
        assert len(recorded.header("webhook-signature").split()) == 2
        assert independently_verified(new, recorded)
        assert independently_verified(old, recorded)

        WebhookSigningSecret.objects.filter(account=account).update(rotated_at=webhook_secret_rotate_time_past())
        forget_cached_secrets()  # workers keep an account's secrets a few seconds; this test moved time by hand
        send(http_sink.url("/ok"), body={}, account_id=account.id)
        recorded = http_sink.requests[-1]
        assert len(recorded.header("webhook-signature").split()) == 1
        assert not independently_verified(old, recorded)

    def test_custom_headers_are_sent(self, webhook_settings, http_sink):
        send(http_sink.url("/ok"), headers={"X-Relay-Step": "7", "Authorization": "Bearer abc"}, body=[1, 2])
        (recorded,) = http_sink.requests
        assert recorded.header("X-Relay-Step") == "7"
        assert recorded.header("Authorization") == "Bearer abc"
        assert recorded.body == b"[1,2]"


def webhook_secret_rotate_time_past():
    from datetime import timedelta

    from django.utils import timezone

    return timezone.now() - timedelta(hours=25)


class TestClassification:
    def test_503_n_times_then_200(self, webhook_settings, http_sink):
        url = http_sink.url("/flaky/3/a")
        for _ in range(3):
            with pytest.raises(ServerFailure) as raised:
                send(url, body={})
            assert classify(raised.value).retryable
        assert send(url, body={}).status_code == 200

    def test_429_with_retry_after_in_seconds(self, webhook_settings, http_sink):
        with pytest.raises(RateLimited) as raised:
            send(http_sink.url("/limited/seconds"), body={})
        assert raised.value.retry_after == 7.0
        assert classify(raised.value).retry_after == 7.0

    def test_429_with_retry_after_as_an_http_date(self, webhook_settings, http_sink):
        with pytest.raises(RateLimited) as raised:
            send(http_sink.url("/limited/date"), body={})
        assert 25.0 <= raised.value.retry_after <= 30.0

    def test_retry_after_is_capped(self, webhook_settings, http_sink):
        webhook_settings.WEBHOOK_RETRY_AFTER_MAX_SECONDS = 5
        with pytest.raises(RateLimited) as raised:
            send(http_sink.url("/limited/date"), body={})
        assert raised.value.retry_after == 5.0

    def test_an_answer_in_a_charset_no_one_knows_is_read_as_utf8(self, webhook_settings, http_sink):
        response = send(http_sink.url("/charset/unknown"), body={})
        assert response.status_code == 200
        assert response.body == '{"ok": true}'

    def test_503_with_retry_after_is_retried_no_sooner_than_it_says(self, webhook_settings, http_sink):
        with pytest.raises(ServerFailure) as raised:
            send(http_sink.url("/unavailable/retry-after"), body={})
        assert classify(raised.value).retry_after == 9.0

    @pytest.mark.parametrize("path", ["/trickle/headers", "/trickle/body"])
    def test_an_answer_trickled_a_byte_at_a_time_ends_at_the_overall_deadline(self, webhook_settings, http_sink, path):
        """Each byte comes well within the 0.5 s read timeout; the whole would take over a minute."""
        started = time.monotonic()
        with pytest.raises(TimeoutFailure, match=r"took longer than 2\.5 s in all"):
            send(http_sink.url(path), body={})
        assert time.monotonic() - started < 10
        assert http_sink.requests_to(path)

    @pytest.mark.parametrize(
        ("status", "kind"),
        [
            (400, ValidationFailure),
            (404, ValidationFailure),
            (410, ValidationFailure),
            (422, ValidationFailure),
            (401, AuthFailure),
            (403, AuthFailure),
            (408, ServerFailure),
            (500, ServerFailure),
            (502, ServerFailure),
        ],
    )
    def test_status_codes(self, webhook_settings, http_sink, status, kind):
        with pytest.raises(kind) as raised:
            send(http_sink.url(f"/status/{status}"), body={})
        assert type(raised.value) is kind
        assert str(raised.value) == f"webhook http://127.0.0.1:{http_sink.port} answered {status}"
        assert raised.value.response.status_code == status

    def test_a_redirect_is_a_permanent_failure_and_is_not_followed(self, webhook_settings, http_sink):
        with pytest.raises(ValidationFailure, match="redirects are not followed"):
            send(http_sink.url("/redirect"), body={})
        assert [r.path for r in http_sink.requests] == ["/redirect"]

    def test_a_hang_past_the_read_timeout_is_a_timeout(self, webhook_settings, http_sink):
        started = time.monotonic()
        with pytest.raises(TimeoutFailure, match=r"no answer within 0\.5 s"):
            send(http_sink.url("/hang"), body={})
        assert time.monotonic() - started < 5
        assert classify(TimeoutFailure()).retryable

    def test_a_refused_connection_is_a_network_failure(self, settings):
        settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
        with pytest.raises(NetworkFailure, match="connection refused"):
            send(f"http://127.0.0.1:{closed_port()}/x", body={})


class TestAnswerBounds:
    def test_a_50_kb_body_is_read_and_kept_bounded(self, webhook_settings, http_sink):
        response = send(http_sink.url("/big"), method="GET")
        assert response.body_bytes == 50 * 1024
        assert len(response.body) == 4096
        assert response.body_truncated

    def test_reading_stops_at_the_cap(self, webhook_settings, http_sink):
        webhook_settings.WEBHOOK_MAX_RESPONSE_BYTES = 16 * 1024
        webhook_settings.WEBHOOK_RESPONSE_BODY_CHARS = 100_000
        response = send(http_sink.url("/big"), method="GET")
        assert response.body_bytes == 16 * 1024
        assert len(response.body) == 16 * 1024
        assert response.body_truncated

    def test_a_failure_carries_what_the_step_log_keeps(self, webhook_settings, http_sink):
        with pytest.raises(ServerFailure) as raised:
            send(http_sink.url("/status/503"), body={}, message_id="m-1")
        details = failure_details(raised.value)
        assert details["status_code"] == 503
        assert details["body"] == '{"status": 503}'
        assert details["webhook_id"] == "m-1"
        assert details["duration_ms"] > 0
        assert raised.value.response.as_response_data() == details

    def test_a_transport_failure_carries_timing_without_status(self, webhook_settings, http_sink):
        with pytest.raises(TimeoutFailure) as raised:
            send(http_sink.url("/hang"), body={}, message_id="m-2")
        details = failure_details(raised.value)
        assert details["status_code"] is None
        assert details["duration_ms"] >= 400
        assert details["webhook_id"] == "m-2"
        assert raised.value.response is None


class TestBadRequests:
    @pytest.mark.parametrize(
        ("request_kwargs", "message"),
        [
            ({"method": "TRACE"}, "method: must be one of"),
            ({"url": ""}, "url: must not be empty"),
            ({"url": "ftp://127.0.0.1/file"}, "url: the scheme must be http or https"),
            ({"url": "http:///nohost"}, "url:"),
            ({"url": "http://127.0.0.1:99999/"}, "url: not a valid"),
            ({"url": "http://127.0.0.1/a b"}, "url: must not contain spaces"),
            ({"headers": {"webhook-signature": "v1,forged"}}, "headers: webhook-signature is set by Relay"),
            ({"headers": {"Host": "evil.example"}}, "headers: Host is set by Relay"),
            ({"headers": {"X-A": "one\r\nX-B: two"}}, "headers: the value of X-A must be on one line"),
            ({"headers": {"Bad Name": "x"}}, "headers: a header name must be a token"),
            ({"headers": {"X-N": 5}}, "headers: the value of X-N must be a string"),
            ({"headers": {"Authorization": " Bearer t"}}, "headers: the value of Authorization must not start or end"),
            ({"headers": {"Authorization": "Bearer t\t"}}, "headers: the value of Authorization must not start or end"),
            ({"headers": {"X-U": "snow \u2603"}}, "headers: the value of X-U must hold only Latin-1"),
            ({"headers": {"X-C": "a\x07b"}}, "headers: the value of X-C must be on one line, without control"),
            ({"body": {"when": {1, 2}}}, "body: not JSON-serializable"),
            ({"body": float("nan")}, "body: not JSON-serializable"),
            ({"account_id": 987654321}, "account_id: no account 987654321"),
        ],
    )
    def test_bad_input_is_a_validation_failure_naming_the_field(
        self, webhook_settings, http_sink, request_kwargs, message
    ):
        fields = {"method": "POST", "url": http_sink.url("/ok"), "body": {}, **request_kwargs}
        with pytest.raises(ValidationFailure, match=message.replace("(", r"\(")):
            webhook_client().send(WebhookRequest(**fields))
        assert http_sink.requests == []
