"""What a receiver answered is cut down to what is safe to keep."""

import pytest

from integrations.domain.redaction import REDACTED, excerpt, redact, request_secrets


def test_request_secrets_are_the_credentials_the_request_carried():
    found = request_secrets(
        "https://user:p%40ss-word@hooks.example/services/T0001/B0002/XyZ9secretPathPart7?token=q-canary&page=1",
        {"Authorization": "Bearer hdr-canary-123", "Content-Type": "application/json", "X-Api-Key": "key-canary"},
    )
    assert "XyZ9secretPathPart7" in found  # a token-like path segment: a capability URL's credential
    assert "q-canary" in found
    assert "p@ss-word" in found
    assert "hdr-canary-123" in found
    assert "Bearer hdr-canary-123" in found
    assert "key-canary" in found
    assert "application/json" not in found  # harmless headers are not secrets
    assert "1" not in found  # too short to be one


def test_data_the_request_carried_is_not_a_secret():
    """The answer {"tier": "gold"} to ...?tier=gold must keep `gold`: what decides is where a value sits."""
    found = request_secrets(
        "https://api.example.com/v1/customers/12345678/plan?tier=gold&region=europe-west&page=2",
        {"X-Shop": "store-seven", "Accept": "application/json"},
        body={"order": "order-4242", "note": "gift wrap"},
    )
    assert found == []


@pytest.mark.parametrize(
    "name",
    [
        "token",
        "access_token",
        "api_key",
        "apikey",
        "key",
        "secret",
        "client_secret",
        "signature",
        "sig",
        "password",
        "X-Amz-Signature",
        "auth",
        "session_id",
        "jwt",
    ],
)
def test_query_parameters_named_as_credentials_are_secrets(name):
    assert request_secrets(f"https://h.example/x?{name}=s3cr3t-value&tier=gold", {}) == ["s3cr3t-value"]


@pytest.mark.parametrize(
    "header",
    ["Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key", "Api-Key", "X-Auth-Token", "X-Hub-Signature"],
)
def test_auth_headers_are_secrets_and_other_headers_are_not(header):
    found = request_secrets("https://h.example/", {header: "s3cr3t-value", "X-Tenant": "acme-tenant"})
    assert "s3cr3t-value" in found
    assert "acme-tenant" not in found


def test_names_a_step_marks_secret_are_secrets_in_the_query_the_headers_and_the_body():
    found = request_secrets(
        "https://h.example/x?customer_ref=cust-991&tier=gold",
        {"X-Tenant": "acme-tenant", "X-Shop": "store-seven"},
        body={"data": {"Customer_Ref": "cust-in-body"}, "tier": "gold"},
        marked=["customer_ref", "x-tenant"],
    )
    assert sorted(found) == ["acme-tenant", "cust-991", "cust-in-body"]


def test_body_values_under_credential_keys_are_secrets():
    found = request_secrets(
        "https://h.example/", {}, body={"auth": {"password": "hunter2x"}, "items": [{"api_key": 12345}]}
    )
    assert sorted(found) == ["12345", "hunter2x"]


def test_only_token_like_path_segments_are_secrets():
    found = request_secrets(
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXX1234XXXX", {}
    ) + request_secrets("https://webhook.site/3f2a9c1e-6b7d-4e8f-9a0b-1c2d3e4f5a6b", {})
    assert found == ["XXXXXXXXXXXXXXXX1234XXXX", "3f2a9c1e-6b7d-4e8f-9a0b-1c2d3e4f5a6b"]
    assert request_secrets("https://api.example.com/v1/customers/12345678/subscriptions", {}) == []


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
