from collections.abc import Iterator

import pytest
from django.db import connection

from jobs.application import notifications
from tests.integration.workflows.support import WebhookServer
from workflows.application.trigger_cache import trigger_cache


@pytest.fixture(autouse=True)
def _loopback_webhooks(settings):
    """The SSRF guard refuses loopback targets unless allowed; our test servers live on 127.0.0.1."""
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]


@pytest.fixture
def trusted_cache() -> Iterator[None]:
    """This process trusts its trigger cache, as a worker whose listener is connected does."""
    trigger_cache.forget(None)
    notifications.set_listening(True)
    try:
        yield
    finally:
        notifications.set_listening(False)
        trigger_cache.forget(None)


@pytest.fixture
def webhook_server():
    server = WebhookServer().start()
    yield server
    server.stop()


@pytest.fixture
def log_rows_refused_when_secret() -> Iterator[None]:
    """A real refusal by PostgreSQL: a log row whose data holds SECRET fails, its DETAIL quoting the data."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            CREATE FUNCTION relay_test_refuse_log() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF NEW.response_data::text LIKE '%%SECRET%%' THEN
                    RAISE EXCEPTION 'value refused' USING ERRCODE = '22023',
                        DETAIL = 'Failing row contains ' || NEW.response_data::text;
                END IF;
                RETURN NEW;
            END $$;
            CREATE TRIGGER relay_test_refuse_log BEFORE INSERT ON workflows_executionlog
                FOR EACH ROW EXECUTE FUNCTION relay_test_refuse_log();
            """
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER relay_test_refuse_log ON workflows_executionlog")
            cursor.execute("DROP FUNCTION relay_test_refuse_log()")
