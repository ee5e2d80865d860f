"""The chaos suite's fixtures: the test database's URL for the invariants, the effect table, the records file,
and (from the workflow end-to-end tests) a webhook server on loopback the SSRF guard lets through."""

from collections.abc import Iterator

import pytest

import tests.chaos.handlers  # noqa: F401 - registers chaos.work in this process, so enqueue accepts it
from tests.chaos import history
from tests.chaos.harness import effect_table
from tests.e2e.workflows.conftest import _loopback_webhooks, webhook_server  # noqa: F401 - fixtures
from tests.support.processes import test_database_url


@pytest.fixture
def url(transactional_db) -> Iterator[str]:
    """The test database, as the invariants (psycopg) and the workers read it; the effect table emptied, and
    the job history recorded (tests/chaos/history.py) for this test only."""
    found = test_database_url()
    effect_table(found)
    history.install(found)
    yield found
    history.remove(found)


@pytest.fixture
def runs_path(tmp_path) -> str:
    return str(tmp_path / "runs.jsonl")
