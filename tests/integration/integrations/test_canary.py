"""A canary token in a webhook URL's path, query and headers appears in no error, log line or response data."""

import json
import logging

import pytest

from integrations.application.channels import webhook_client
from integrations.domain.channels import WebhookRequest, failure_details
from kernel.failures import JobError, classify, format_error

pytestmark = pytest.mark.django_db

CANARY = "cnry7Q2xZ9kLm4Vw"  # never shorter than what redaction looks for


def canary_request(url: str, **kwargs) -> WebhookRequest:
    return WebhookRequest(
        "POST",
        url,
        headers={"Authorization": f"Bearer {CANARY}-hdr", "X-Api-Key": f"{CANARY}-key"},
        body={"contact": 1},
        **kwargs,
    )


def assert_no_canary(*texts: str) -> None:
    for text in texts:
        assert CANARY not in text, text


def error_texts(error: JobError) -> list[str]:
    return [
        str(error),
        repr(error),
        format_error(error),
        classify(error).message,
        json.dumps(failure_details(error)),
        repr(getattr(error, "response", None)),
    ]


@pytest.fixture
def everything_logged(caplog):
    """Every log record at DEBUG, as with LOG_LEVEL=DEBUG; the settings keep urllib3 (which logs paths) quiet."""
    caplog.set_level(logging.DEBUG)
    for name in ("relay", "relay.integrations", "relay.integrations.webhooks", "requests"):
        caplog.set_level(logging.DEBUG, logger=name)
    assert not logging.getLogger("urllib3").isEnabledFor(logging.ERROR)
    return caplog


@pytest.mark.parametrize(
    ("path", "kind"),
    [("/echo/500", "ServerFailure"), ("/echo/401", "AuthFailure"), ("/echo/404", "ValidationFailure")],
)
def test_failures_echoing_the_request_leak_nothing(webhook_settings, http_sink, account, everything_logged, path, kind):
    url = http_sink.url(f"{path}/{CANARY}-path?token={CANARY}-query&x=1")
    with pytest.raises(JobError) as raised:
        webhook_client().send(canary_request(url, account_id=account.id))
    assert type(raised.value).__name__ == kind
    assert CANARY in json.dumps(http_sink.requests[0].__dict__, default=str)  # the receiver did get them
    assert raised.value.response.body  # and echoed them back, redacted
    assert_no_canary(*error_texts(raised.value), everything_logged.text)
    assert "/echo" not in everything_logged.text  # no path at all in the log
    assert "/echo" not in str(raised.value)


def test_a_success_echoing_the_request_keeps_nothing_secret(webhook_settings, http_sink, account, everything_logged):
    url = http_sink.url(f"/echo?token={CANARY}-query")
    response = webhook_client().send(canary_request(url, account_id=account.id))
    assert response.status_code == 200
    assert '"query": "token=[redacted]"' in response.body  # the token, not the whole query
    assert_no_canary(response.body, json.dumps(response.as_response_data()), repr(response), everything_logged.text)
    assert "v1," not in response.body  # the signature echoed back is cut out too


@pytest.mark.parametrize(
    "url",
    [
        "/hang?token={canary}-query",
        "/redirect?token={canary}-query",
        "/limited/seconds?token={canary}-query",
        "/malformed-header?token={canary}-query",  # urllib3 logs the whole URL with the lines it could not parse
    ],
)
def test_timeouts_redirects_and_rate_limits_leak_nothing(webhook_settings, http_sink, everything_logged, url):
    with pytest.raises(JobError) as raised:
        webhook_client().send(canary_request(http_sink.url(url.format(canary=CANARY))))
    assert_no_canary(*error_texts(raised.value), everything_logged.text)
    assert "moved-secret" not in json.dumps(failure_details(raised.value))  # the Location's query is cut too


@pytest.mark.parametrize(
    "url",
    [
        f"http://10.0.0.1/{CANARY}-path?token={CANARY}-query",
        f"http://user:{CANARY}-pw@169.254.169.254/latest/meta-data?{CANARY}",
        f"ftp://127.0.0.1/{CANARY}",
        f"http://127.0.0.1:{CANARY}/",
    ],
)
def test_refused_and_invalid_urls_leak_nothing(settings, everything_logged, url):
    settings.WEBHOOK_ALLOWED_HOSTS = []
    with pytest.raises(JobError) as raised:
        webhook_client().send(canary_request(url))
    assert_no_canary(*error_texts(raised.value), everything_logged.text)


def test_a_refused_connection_leaks_nothing(settings, everything_logged):
    from tests.integration.integrations.servers import closed_port

    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    with pytest.raises(JobError) as raised:
        webhook_client().send(canary_request(f"http://127.0.0.1:{closed_port()}/{CANARY}?t={CANARY}"))
    assert_no_canary(*error_texts(raised.value), everything_logged.text)


@pytest.mark.parametrize(
    "value", [f" Bearer {CANARY}", f"Bearer {CANARY}\u2603", f"Bearer {CANARY}\x01"], ids=["space", "utf8", "control"]
)
def test_a_header_value_the_http_library_refuses_is_never_quoted(webhook_settings, http_sink, everything_logged, value):
    request = WebhookRequest("POST", http_sink.url("/ok"), headers={"Authorization": value}, body={})
    with pytest.raises(JobError) as raised:
        webhook_client().send(request)
    assert classify(raised.value).retryable is False
    assert "Authorization" in str(raised.value)
    assert_no_canary(*error_texts(raised.value), everything_logged.text)
    assert http_sink.requests == []
