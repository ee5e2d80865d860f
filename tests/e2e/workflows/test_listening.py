"""An event right after an account's first workflow that waits for events is heard by a real worker, even one
whose notification connection went half-open and so never heard of the publish."""

import time

import pytest
from django.db import connection

from contacts.infrastructure.models import Contact
from tests.factories import AccountFactory, ContactFactory
from tests.integration.workflows.support import make_workflow, waiting_workflow
from tests.support import processes
from tests.support.processes import wait_until
from tests.support.proxy import FreezingProxy
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import WorkflowExecution

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TIMEOUT = 40
LISTENER = b"relay-listener"  # the application_name of the worker's LISTEN connection


@pytest.fixture
def proxy():
    proxy, url = FreezingProxy.before(processes.test_database_url())
    yield proxy, url
    proxy.stop()  # every relayed session ends (the workers' too), so the test database can be dropped
    deadline = time.monotonic() + 10
    while _other_sessions() and time.monotonic() < deadline:
        time.sleep(0.1)


def _other_sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def status_of(run) -> str:
    return WorkflowExecution.objects.values_list("status", flat=True).get(pk=run.pk)


def wait_for_status(run, *statuses: str, timeout: float = TIMEOUT) -> None:
    wait_until(lambda: status_of(run) in statuses, timeout, f"run {run.pk} to be {' or '.join(statuses)}")


def test_an_event_right_after_the_first_listening_publish_is_heard_by_a_worker_that_missed_it(start_worker, proxy):
    relay, url = proxy
    # Cached answers never expire here: only the notification could tell this worker of the publish, and it
    # will not come (its listener's connection is left half-open below, as a NAT box that forgot it would).
    worker = start_worker(
        DATABASE_URL=url, JOB_POLL_INTERVAL="0.2", LOG_LEVEL="INFO", WORKFLOW_TRIGGER_CACHE_MAX_AGE="3600"
    )
    worker.wait_for_output("listening for job notifications")
    account = AccountFactory()
    contact = ContactFactory(account=account)
    tagger = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "plain"}}], name="Tagger")
    tagged = start_run(workflow_id=tagger.pk, contact_id=contact.pk).execution
    wait_for_status(tagged, "completed")  # its tag event: the worker has asked "does this account listen?"
    assert relay.connections_with(LISTENER) >= 1
    relay.freeze(LISTENER)  # from now on the worker's listener hears nothing, and believes it is connected

    waits = waiting_workflow(account, name="Waits for gold")
    waiting = start_run(workflow_id=waits.pk, contact_id=contact.pk).execution
    wait_for_status(waiting, "waiting")
    gilder = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "gold"}}], name="Gilder")
    gilded = start_run(workflow_id=gilder.pk, contact_id=contact.pk).execution
    wait_for_status(gilded, "completed")  # the tag.added event, in the worker's step transaction

    wait_for_status(waiting, "completed", timeout=20)
    assert "heard" in Contact.objects.get(pk=contact.pk).tags
    assert "late" not in Contact.objects.get(pk=contact.pk).tags
