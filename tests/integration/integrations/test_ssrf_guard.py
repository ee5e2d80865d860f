"""The SSRF guard in the real client: refused targets never get a connection; the allow-list and the pin.

Loopback spellings carry the sink's port, so a hole in the guard would show up as a request at the sink;
every other address is stopped by the `loopback_only` fixture before a packet leaves, and fails the test.
"""

import ssl

import pytest
import trustme

from integrations.application.channels import webhook_client
from integrations.domain.channels import WebhookRequest
from integrations.infrastructure.webhooks import RequestsWebhookClient
from kernel.failures import NetworkFailure, ValidationFailure, classify
from tests.integration.integrations.servers import HttpSink

pytestmark = pytest.mark.django_db

LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "localhost",
    "LOCALHOST.",
    "127.1",
    "127.0.1",
    "127.000.000.001",
    "2130706433",
    "0x7f000001",
    "0x7f.0.0.1",
    "0x7f.1",
    "0177.0.0.1",
    "017700000001",
    "127.255.255.254",
    "0.0.0.0",
    "0",
    "[::1]",
    "[::]",
    "[0:0:0:0:0:0:0:1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[0:0:0:0:0:ffff:7f00:0001]",
    "[::127.0.0.1]",
    "[2002:7f00:1::]",
]

OTHER_REFUSED = [
    ("169.254.169.254", "cloud metadata"),
    ("2852039166", "cloud metadata"),
    ("0xa9fea9fe", "cloud metadata"),
    ("0251.0376.0251.0376", "cloud metadata"),
    ("[::ffff:169.254.169.254]", "cloud metadata"),
    ("[::ffff:a9fe:a9fe]", "cloud metadata"),
    ("[64:ff9b::a9fe:a9fe]", "cloud metadata"),
    ("[fd00:ec2::254]", "cloud metadata"),
    ("169.254.0.1", "link-local"),
    ("10.0.0.1", "private"),
    ("10.1", "private"),
    ("172.16.5.4", "private"),
    ("192.168.1.1", "private"),
    ("[::ffff:10.0.0.1]", "private"),
    ("[fc00::1]", "private"),
    ("100.64.0.1", "not a public"),
    ("224.0.0.1", "multicast"),
    ("[ff02::1]", "multicast"),
    ("[fe80::1]", "link-local"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "broadcast"),
    ("256.1.1.1", "not a valid IP address"),
]


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_loopback_in_any_spelling_is_refused(http_sink, settings, host):
    settings.WEBHOOK_ALLOWED_HOSTS = []
    with pytest.raises(ValidationFailure, match="webhook target refused") as raised:
        webhook_client().send(WebhookRequest("POST", f"http://{host}:{http_sink.port}/ok", body={}))
    assert not classify(raised.value).retryable
    assert http_sink.requests == []


@pytest.mark.parametrize(("host", "reason"), OTHER_REFUSED)
def test_private_link_local_metadata_multicast_reserved_are_refused_and_say_why(settings, host, reason):
    settings.WEBHOOK_ALLOWED_HOSTS = []
    with pytest.raises(ValidationFailure) as raised:
        webhook_client().send(WebhookRequest("POST", f"http://{host}/hook", body={}))
    assert str(raised.value).startswith("webhook target refused: ")
    assert reason in str(raised.value)


def fake_resolver(table: dict[str, list[list[str]]]):
    """Answers per name, one answer per call (the last repeats): lets a test change DNS between calls."""
    calls: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        answers = table[host]
        return answers[min(len(calls) - 1, len(answers) - 1)]

    resolve.calls = calls  # type: ignore[attr-defined]  # the fake resolver carries its call log for the test
    return resolve


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (["10.20.30.40"], "resolves to 10.20.30.40, which is a private address"),
        (["93.184.216.34", "127.0.0.1"], "resolves to 127.0.0.1, which is a loopback address"),
        (["2606:4700::1", "::ffff:169.254.169.254"], "cloud metadata"),
        (["fe80::1%2"], "link-local"),
    ],
)
def test_a_name_resolving_to_any_bad_address_is_refused(settings, answer, reason):
    settings.WEBHOOK_ALLOWED_HOSTS = []
    client = RequestsWebhookClient(resolver=fake_resolver({"hooks.customer.example": [answer]}))
    with pytest.raises(ValidationFailure, match=reason):
        client.send(WebhookRequest("POST", "https://hooks.customer.example/in", body={}))


class TestAllowList:
    def test_exactly_the_named_host_and_port_get_through(self, settings, http_sink):
        other = HttpSink().start()
        try:
            settings.WEBHOOK_ALLOWED_HOSTS = [f"127.0.0.1:{http_sink.port}"]
            assert webhook_client().send(WebhookRequest("GET", http_sink.url("/ok"))).status_code == 200
            for url in (
                other.url("/ok"),  # same host, another port
                f"http://localhost:{http_sink.port}/ok",  # same address, another name
                f"http://2130706433:{http_sink.port}/ok",  # same address, another spelling
                f"http://[::1]:{http_sink.port}/ok",
                f"http://127.0.0.2:{http_sink.port}/ok",
            ):
                with pytest.raises(ValidationFailure, match="webhook target refused"):
                    webhook_client().send(WebhookRequest("GET", url))
            assert len(http_sink.requests) == 1
            assert other.requests == []
        finally:
            other.stop()

    def test_a_host_only_entry_allows_any_port(self, settings, http_sink):
        settings.WEBHOOK_ALLOWED_HOSTS = "127.0.0.1"  # as the environment gives it
        assert webhook_client().send(WebhookRequest("GET", http_sink.url("/ok"))).status_code == 200

    def test_settings_are_read_at_call_time(self, settings, http_sink):
        client = webhook_client()
        settings.WEBHOOK_ALLOWED_HOSTS = []
        with pytest.raises(ValidationFailure):
            client.send(WebhookRequest("GET", http_sink.url("/ok")))
        settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
        assert client.send(WebhookRequest("GET", http_sink.url("/ok"))).status_code == 200


class TestPinnedConnection:
    def test_the_connection_goes_to_the_checked_address_not_a_second_dns_answer(self, settings, http_sink):
        """DNS rebinding: the first answer is checked, a later one would point inside. Only the first is used."""
        settings.WEBHOOK_ALLOWED_HOSTS = [f"hook.test:{http_sink.port}"]
        resolve = fake_resolver({"hook.test": [["127.0.0.1"], ["10.9.9.9"]]})
        client = RequestsWebhookClient(resolver=resolve)
        response = client.send(WebhookRequest("POST", f"http://hook.test:{http_sink.port}/ok", body={}))
        assert response.status_code == 200
        assert resolve.calls == ["hook.test"]  # resolved once; the system resolver (no such name) never asked
        assert http_sink.requests[0].header("Host") == f"hook.test:{http_sink.port}"

    def test_tls_keeps_sni_and_verifies_the_certificate_for_the_host_name(self, settings, tmp_path):
        ca = trustme.CA()
        ca_file = tmp_path / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        with tls_sink(ca, "hook.test") as (sink, server_names):
            settings.WEBHOOK_ALLOWED_HOSTS = [f"hook.test:{sink.port}"]
            settings.WEBHOOK_CA_BUNDLE = str(ca_file)
            client = RequestsWebhookClient(resolver=fake_resolver({"hook.test": [["127.0.0.1"]]}))
            response = client.send(WebhookRequest("POST", f"https://hook.test:{sink.port}/ok", body={}))
            assert response.status_code == 200
            assert server_names == ["hook.test"]
            assert sink.requests[0].header("Host") == f"hook.test:{sink.port}"

    def test_a_certificate_for_another_name_is_refused(self, settings, tmp_path):
        ca = trustme.CA()
        ca_file = tmp_path / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        with tls_sink(ca, "other.test") as (sink, _):
            settings.WEBHOOK_ALLOWED_HOSTS = [f"hook.test:{sink.port}"]
            settings.WEBHOOK_CA_BUNDLE = str(ca_file)
            client = RequestsWebhookClient(resolver=fake_resolver({"hook.test": [["127.0.0.1"]]}))
            with pytest.raises(NetworkFailure, match="TLS certificate verification failed"):
                client.send(WebhookRequest("POST", f"https://hook.test:{sink.port}/ok", body={}))
            assert sink.requests == []


class tls_sink:
    """An HttpSink behind TLS with a certificate for `name`, recording the SNI each handshake sent."""

    def __init__(self, ca, name: str) -> None:
        self.ca, self.name = ca, name

    def __enter__(self):
        self.sink = HttpSink()
        self.server_names: list[str | None] = []
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(self.name).configure_cert(context)
        context.sni_callback = lambda sock, server_name, ctx: self.server_names.append(server_name)
        self.sink.httpd.socket = context.wrap_socket(self.sink.httpd.socket, server_side=True)
        self.sink.start()
        return self.sink, self.server_names

    def __exit__(self, *exc):
        self.sink.stop()
        return False


def test_an_allow_listed_ipv6_target_is_reached_with_its_bracketed_host(settings):
    try:
        sink = HttpSink(host="::1").start()
    except OSError:
        pytest.skip("this machine has no IPv6 loopback")
    try:
        settings.WEBHOOK_ALLOWED_HOSTS = ["[::1]"]
        response = webhook_client().send(WebhookRequest("GET", sink.url("/ok")))
        assert response.status_code == 200
        assert sink.requests[0].header("Host") == f"[::1]:{sink.port}"
    finally:
        sink.stop()
