"""The chaos suite's fixtures: the test database's URL for the invariants, the effect table, the records file."""

import pytest

import tests.chaos.handlers  # noqa: F401 - registers chaos.work in this process, so enqueue accepts it
from tests.chaos.harness import effect_table
from tests.integration.workflows.support import WebhookServer
from tests.support.processes import test_database_url


@pytest.fixture
def url(transactional_db) -> str:
    """The test database, as the invariants (psycopg) and the workers read it; the effect table emptied."""
    found = test_database_url()
    effect_table(found)
    return found


@pytest.fixture
def runs_path(tmp_path) -> str:
    return str(tmp_path / "runs.jsonl")


@pytest.fixture(autouse=True)
def _loopback_webhooks(settings):
    """The SSRF guard refuses loopback targets unless allowed; the test's webhook server lives on 127.0.0.1."""
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]


@pytest.fixture
def webhook_server():
    server = WebhookServer().start()
    yield server
    server.stop()
