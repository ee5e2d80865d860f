"""Fixtures shared by the integrations tests (imported by the conftest of each tier)."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from tests.integration.integrations.servers import FakeTwilio, HttpSink, SilentListener, SmtpServer


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """No test here may open a connection beyond loopback, even if the SSRF guard had a hole.

    A refused attempt is recorded and fails the test at teardown; the connection never leaves.
    """
    attempts: list[str] = []

    def check(sock: socket.socket, address) -> None:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return
        ip = ipaddress.ip_address(str(address[0]).split("%", 1)[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if not ip.is_loopback:
            attempts.append(str(address[0]))
            raise ConnectionRefusedError(f"test guard: no connection to {address[0]} from the tests")

    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(sock, address):
        check(sock, address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        check(sock, address)
        return real_connect_ex(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield attempts
    assert attempts == [], f"connections beyond loopback were attempted: {attempts}"


@pytest.fixture
def http_sink():
    sink = HttpSink().start()
    yield sink
    sink.stop()


@pytest.fixture
def fake_twilio():
    provider = FakeTwilio().start()
    yield provider
    provider.stop()


@pytest.fixture
def smtp_server():
    server = SmtpServer().start()
    yield server
    server.stop()


@pytest.fixture
def silent_listener():
    listener = SilentListener()
    yield listener
    listener.stop()


@pytest.fixture
def webhook_settings(settings, http_sink):
    """Short timeouts, and the sink's exact host:port allowed through the SSRF guard."""
    settings.WEBHOOK_ALLOWED_HOSTS = [f"127.0.0.1:{http_sink.port}"]
    settings.WEBHOOK_CONNECT_TIMEOUT = 2.0
    settings.WEBHOOK_READ_TIMEOUT = 0.5
    settings.WEBHOOK_MAX_RESPONSE_BYTES = 64 * 1024
    settings.WEBHOOK_RESPONSE_BODY_CHARS = 4096
    return settings


@pytest.fixture
def twilio_settings(settings, fake_twilio):
    settings.SMS_PROVIDER = "twilio"
    settings.VOICE_PROVIDER = ""
    settings.TWILIO_ACCOUNT_SID = fake_twilio.account_sid
    settings.TWILIO_AUTH_TOKEN = fake_twilio.auth_token
    settings.TWILIO_FROM_NUMBER = "+15550100000"
    settings.TWILIO_BASE_URL = fake_twilio.base_url()
    settings.TWILIO_READ_TIMEOUT = 0.5
    return settings
