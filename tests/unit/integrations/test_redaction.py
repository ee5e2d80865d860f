"""What a receiver answered is cut down to what is safe to keep."""

from integrations.domain.redaction import REDACTED, excerpt, redact, request_secrets


def test_request_secrets_cover_path_query_credentials_and_header_values():
    found = request_secrets(
        "https://user:p%40ss-word@hooks.example/services/T0001/B0002/XyZsecretPathPart?token=q-canary&page=1",
        {"Authorization": "Bearer hdr-canary-123", "Content-Type": "application/json", "X-Api-Key": "key-canary"},
    )
    assert "XyZsecretPathPart" in found
    assert "q-canary" in found
    assert "p@ss-word" in found
    assert "hdr-canary-123" in found
    assert "Bearer hdr-canary-123" in found
    assert "key-canary" in found
    assert "application/json" not in found  # harmless headers are not secrets
    assert "1" not in found  # too short to be one


def test_known_secrets_are_cut_out_longest_first():
    text = "echo: token=abcdef123 and abcdef123456"
    assert redact(text, secrets=["abcdef123", "abcdef123456"]) == f"echo: token={REDACTED} and {REDACTED}"


def test_secret_looking_values_are_masked_in_json_and_forms():
    body = '{"id": 7, "api_key": "sk_live_123", "nested": {"password": "hunter2"}, "access_token": 12345}'
    redacted = redact(body)
    assert "sk_live_123" not in redacted
    assert "hunter2" not in redacted
    assert "12345" not in redacted
    assert '"id": 7' in redacted
    assert redact("a=1&client_secret=xyz&b=2") == f"a=1&client_secret={REDACTED}&b=2"
    assert "abc.def.ghi" not in redact("Authorization: Bearer abc.def.ghi")
    assert "whsec_" not in redact("secret is whsec_AAAABBBBCCCC")


def test_urls_are_cut_to_scheme_and_host():
    assert redact("see https://internal.example/reset?code=9f8e7d") == "see https://internal.example"


def test_excerpt_bounds_and_reports_the_cut():
    assert excerpt("abcdef", 4) == ("abcd", True)
    assert excerpt("abc", 4) == ("abc", False)
