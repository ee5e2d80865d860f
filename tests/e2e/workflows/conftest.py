import pytest

from tests.integration.workflows.support import WebhookServer


@pytest.fixture(autouse=True)
def _loopback_webhooks(settings):
    """The SSRF guard refuses loopback targets unless allowed; our test servers live on 127.0.0.1."""
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]


@pytest.fixture
def webhook_server():
    server = WebhookServer().start()
    yield server
    server.stop()
