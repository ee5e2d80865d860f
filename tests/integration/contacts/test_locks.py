"""Contact row locks on PostgreSQL: strong enough to serialize writers, weak enough to let children in.

A row lock taken to change a contact must not block inserting rows that reference it (runs, jobs' logs,
consent records take a FOR KEY SHARE lock on the contact through their foreign key), and every path takes
its locks in one order (a contact's runs, then the contact, then its account), so none deadlocks another.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg
import pytest
from django.db import connection, transaction

from contacts.application.services import contact_add_tag, contact_delete, contact_set_consent
from contacts.domain.model import ConsentChannel, ConsentSource
from contacts.infrastructure.store import ContactStore
from contacts.models import Contact
from tests.factories import AccountFactory, ContactFactory
from tests.integration.workflows.support import make_workflow
from workflows.application.runs.starting import start_run
from workflows.infrastructure.models import WorkflowExecution
from workflows.infrastructure.store import RunStore

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TAG_STEP = {"action_type": "add_tag", "config": {"tag": "done"}}


def _params() -> dict:
    return {k: v for k, v in connection.get_connection_params().items() if k in ("dbname", "user", "host", "port")}


def _lock_with_store(contact_id: int) -> None:
    ContactStore().lock(contact_id)


def _lock_with_consent_service(contact_id: int) -> None:
    contact_set_consent(contact_id=contact_id, channel=ConsentChannel.SMS, opted_out=True, source=ConsentSource.API)


@pytest.mark.parametrize("take_lock", [_lock_with_store, _lock_with_consent_service])
def test_a_locked_contact_still_takes_new_rows_that_reference_it(take_lock: Callable[[int], None]):
    """While one transaction holds the contact's lock, others insert a consent record and start a run for it."""
    account = AccountFactory.create()
    contact = ContactFactory.create(account=account)
    workflow = make_workflow(account, [TAG_STEP])
    started: list[object] = []

    def start_elsewhere() -> None:  # another connection, with a short lock wait: without the fix it fails fast
        try:
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = '2s'")
            started.append(start_run(workflow_id=workflow.pk, contact_id=contact.pk))
        except Exception as exc:
            started.append(exc)
        finally:
            connection.close()

    with transaction.atomic():
        take_lock(contact.pk)
        with psycopg.connect(**_params()) as other:
            other.execute("SET lock_timeout = '2s'")
            other.execute(
                "INSERT INTO contacts_consentchange (contact_id, channel, opted_out, source, detail, created_at)"
                " VALUES (%s, 'email', true, 'api', '', now())",
                [contact.pk],
            )
            other.commit()
        starter = threading.Thread(target=start_elsewhere)
        starter.start()
        starter.join(10)
    assert len(started) == 1
    assert not isinstance(started[0], Exception), started[0]
    assert WorkflowExecution.objects.filter(contact=contact).count() == 1


def _blocked(pid: int, timeout: float = 5.0) -> bool:
    """Whether backend `pid` is waiting for a lock (polled until `timeout`)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(autocommit=True, **_params()) as conn:
        while time.monotonic() < deadline:
            if conn.execute("SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted", [pid]).fetchone():
                return True
            time.sleep(0.02)
    return False


def _step_and_delete_at_once(account, workflow) -> list[BaseException]:
    """One tag step (its run locked, then the contact tagged) and one delete of the same contact, interleaved
    so the delete comes while the step holds its run's lock."""
    contact = ContactFactory.create(account=account)
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    deleter_pid: dict[str, int] = {}
    run_locked = threading.Event()
    errors: list[BaseException] = []

    def step() -> None:
        try:
            with transaction.atomic():
                assert RunStore().lock_run_with_contact(run.pk) is not None  # as run_step does
                run_locked.set()
                assert _blocked(_wait_for(deleter_pid)), "the delete should wait for something"
                contact_add_tag(contact_id=contact.pk, tag="vip")  # as the add_tag step does
        except BaseException as exc:
            errors.append(exc)
        finally:
            run_locked.set()
            connection.close()

    def delete() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                pid = cursor.fetchone()[0]
            run_locked.wait(10)
            deleter_pid["pid"] = pid
            contact_delete(contact_id=contact.pk)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    _run_together(step, delete)
    if not errors:
        assert not Contact.objects.filter(pk=contact.pk).exists()
        assert not WorkflowExecution.objects.filter(pk=run.pk).exists()
    return errors


def test_deleting_a_contact_while_a_step_tags_it_does_not_deadlock():
    """A tag step holds its run's lock and then tags the contact; a delete that lands in between must wait
    for the step (the engine's order: the run, then the contact), not lock the contact and wait for the run."""
    account = AccountFactory.create()
    workflow = make_workflow(account, [TAG_STEP])
    for _ in range(3):
        assert _step_and_delete_at_once(account, workflow) == []


def _run_together(*targets: Callable[[], None]) -> None:
    threads = [threading.Thread(target=target) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)


def _wait_for(holder: dict[str, int], timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while "pid" not in holder and time.monotonic() < deadline:
        time.sleep(0.01)
    return holder["pid"]


def _tag_and_delete_at_once(contact_id: int) -> list[BaseException]:
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def together(action: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            try:
                barrier.wait(10)
                action()
            except Contact.DoesNotExist:
                pass  # the delete went first: the tag has no contact left to go on
            except BaseException as exc:
                errors.append(exc)
            finally:
                connection.close()

        return run

    _run_together(
        together(lambda: contact_add_tag(contact_id=contact_id, tag="vip")),
        together(lambda: contact_delete(contact_id=contact_id)),
    )
    return errors


def test_concurrent_deletes_and_tag_adds_finish_without_deadlocks():
    """Through the services only, started together (the tag starts a workflow): no error, the contact gone."""
    account = AccountFactory.create()
    make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "tag.added", "tag": "vip"})
    manual = make_workflow(account, [TAG_STEP], name="manual")
    for _ in range(5):
        contact = ContactFactory.create(account=account)
        start_run(workflow_id=manual.pk, contact_id=contact.pk)
        assert _tag_and_delete_at_once(contact.pk) == []
        assert not Contact.objects.filter(pk=contact.pk).exists()


@pytest.mark.parametrize("lock", ["lock_account", "lock_for_start"])
def test_a_locked_account_still_takes_new_contacts_and_runs(lock: str):
    """Starting a run locks its account (starts are counted against the account's limit one at a time);
    that lock must not block inserting the account's contacts or another account's work meanwhile."""
    account = AccountFactory.create()
    contact = ContactFactory.create(account=account)
    workflow = make_workflow(account, [TAG_STEP])
    with transaction.atomic():
        if lock == "lock_account":
            RunStore().lock_account(account.pk)
        else:
            RunStore().lock_for_start(workflow.pk, account.pk, contact.pk)
        with psycopg.connect(**_params()) as other:
            other.execute("SET lock_timeout = '2s'")
            other.execute(
                "INSERT INTO contacts_contact (account_id, email, phone, first_name, last_name, custom_fields, tags,"
                " unsubscribed, sms_opted_out, created_at, updated_at)"
                " VALUES (%s, 'new@example.com', '', '', '', '{}', '[]', false, false, now(), now())",
                [account.pk],
            )
            other.commit()
    assert Contact.objects.filter(account=account, email="new@example.com").exists()
