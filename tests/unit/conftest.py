"""The database-free tier (`make test-unit`): a test here that asks for the database is a collection error."""

from pathlib import Path

import pytest

UNIT = Path(__file__).parent
DATABASE_FIXTURES = {
    "db",
    "transactional_db",
    "django_db_reset_sequences",
    "django_db_serialized_rollback",
    "live_server",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if UNIT not in Path(item.path).parents:
            continue  # the hook sees the whole session's items
        if item.get_closest_marker("django_db") or DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())):
            raise pytest.UsageError(f"{item.nodeid}: unit tests run without a database; move it to tests/integration/")
