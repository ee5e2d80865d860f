"""Standard Webhooks v1 signing, checked against the specification's example and an independent HMAC."""

import base64
import hashlib
import hmac

import pytest

from integrations.domain.signing import (
    InvalidSecret,
    generate_secret,
    mask_secret,
    new_message_id,
    sign,
    signature_headers,
    verify,
)

# The example from the Standard Webhooks specification (and its reference libraries' tests).
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def independent_signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def test_matches_the_specification_example():
    assert sign(SPEC_SECRET, message_id=SPEC_ID, timestamp=SPEC_TIMESTAMP, body=SPEC_BODY) == SPEC_SIGNATURE
    assert independent_signature(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == SPEC_SIGNATURE


def test_generated_secrets_are_whsec_with_32_random_bytes():
    first, second = generate_secret(), generate_secret()
    assert first.startswith("whsec_")
    assert first != second
    assert len(base64.b64decode(first.removeprefix("whsec_"))) == 32


def test_headers_carry_one_signature_per_secret_current_first():
    current, previous = generate_secret(), generate_secret()
    headers = signature_headers([current, previous], message_id="msg_1", timestamp=1700000000, body=b"{}")
    assert headers["webhook-id"] == "msg_1"
    assert headers["webhook-timestamp"] == "1700000000"
    assert headers["webhook-signature"].split(" ") == [
        independent_signature(current, "msg_1", 1700000000, b"{}"),
        independent_signature(previous, "msg_1", 1700000000, b"{}"),
    ]


def test_no_secret_means_no_signature_header():
    headers = signature_headers([], message_id="msg_1", timestamp=1, body=b"")
    assert "webhook-signature" not in headers
    assert headers["webhook-id"] == "msg_1"


def test_verify_accepts_the_right_signature_within_tolerance_only():
    secret = generate_secret()
    headers = signature_headers([secret], message_id="msg_x", timestamp=1000, body=b'{"a":1}')
    assert verify(secret, headers=headers, body=b'{"a":1}', now=1100)
    assert not verify(secret, headers=headers, body=b'{"a":2}', now=1100)  # altered body
    assert not verify(secret, headers=headers, body=b'{"a":1}', now=2000)  # replayed late
    assert not verify(generate_secret(), headers=headers, body=b'{"a":1}', now=1100)  # other secret
    assert not verify(secret, headers={}, body=b"", now=1000)


@pytest.mark.parametrize("bad", ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_", "whsec_not base64!"])
def test_invalid_secrets_are_refused_without_echoing_them(bad):
    with pytest.raises(InvalidSecret) as raised:
        sign(bad, message_id="m", timestamp=1, body=b"")
    assert bad.removeprefix("whsec_") not in str(raised.value) or bad == "whsec_"


def test_message_ids_and_masks():
    assert new_message_id().startswith("msg_")
    assert new_message_id() != new_message_id()
    secret = generate_secret()
    masked = mask_secret(secret)
    assert masked.startswith("whsec_")
    assert len(masked) < 15
    assert secret not in masked
