"""Steps claimed together: `run_steps` (workflows.application.runs.batches, the `workflow_step` batch handler).

`run_step`, one job at a time, is the reference: a batch must leave every run, contact, log row and job
exactly as running its jobs one by one would, and what it cannot carry out it returns untouched for
`run_step`. Jobs are claimed here as a worker claims them, with real JobContexts; what the batch leaves is
then run as the worker runs it (the ordinary handler, then the acknowledgement).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from contacts.infrastructure.models import Contact
from jobs.application.context import context_for
from jobs.application.queue import enqueue
from jobs.application.registry import BatchItem, get_batch_handler, get_handler
from jobs.application.worker import Worker
from jobs.infrastructure.models import Job
from jobs.infrastructure.store import Finished, get_store
from tests.factories import ContactFactory
from tests.integration.integrations.servers import HttpSink
from tests.integration.workflows.support import TEST_WORKER, make_workflow
from workflows.application.runs.batches import run_steps
from workflows.application.runs.moves import RESUME_HANDLER, STEP_HANDLER
from workflows.application.runs.operating import pause_run, resume_run
from workflows.application.runs.starting import start_run, start_runs
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

# Claims commit on their own: these tests commit too.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sink():
    """A real HTTP server on loopback that answers by path (/ok 200, /status/<code> that status, ...)."""
    server = HttpSink().start()
    yield server
    server.stop()


def start(workflow, contact, **trigger: Any) -> WorkflowExecution:
    return start_run(workflow_id=workflow.pk, contact_id=contact.pk, trigger_data=trigger).execution


def claim(limit: int = 100) -> list[BatchItem]:
    """Claim due jobs as a worker does, each with its JobContext."""
    store = get_store()
    return [(job.payload, context_for(job, store, TEST_WORKER)) for job in store.claim(TEST_WORKER, None, limit, 60)]


def acknowledge(items: list[BatchItem]) -> None:
    """The worker's acknowledgement of the jobs a handler did not complete in its own transaction."""
    done = [
        Finished(job.id, job.attempt_number, job.started, time.time())
        for _payload, job in items
        if not job.completed_in_transaction
    ]
    if done:
        get_store().complete(TEST_WORKER, done)


def one_by_one(items: list[BatchItem]) -> None:
    """What the worker does with the jobs a batch left: the ordinary handler, then the acknowledgement."""
    for payload, job in items:
        get_handler(STEP_HANDLER)(payload, job)
        acknowledge([(payload, job)])


def as_worker(items: list[BatchItem]) -> list[BatchItem]:
    """run_steps, then what the worker does after it: acknowledge what it neither completed nor left, and
    run what it left one by one. Returns what it left."""
    left = run_steps(items)
    left_ids = {job.id for _payload, job in left}
    acknowledge([item for item in items if item[1].id not in left_ids])
    one_by_one(left)
    return left


def ids(items: list[BatchItem]) -> set[uuid.UUID]:
    return {job.id for _payload, job in items}


def items_of(items: list[BatchItem], *runs: WorkflowExecution) -> list[BatchItem]:
    wanted = {str(run.pk) for run in runs}
    return [item for item in items if item[0]["execution_id"] in wanted]


def logs(run: WorkflowExecution) -> list[tuple]:
    return list(
        ExecutionLog.objects.filter(execution=run)
        .order_by("id")
        .values_list("step_index", "action_type", "attempt_number", "outcome")
    )


def job_status(job_id) -> str:
    return Job.objects.values_list("status", flat=True).get(pk=job_id)


def test_run_steps_is_the_workflow_step_batch_handler():
    assert get_batch_handler(STEP_HANDLER) is not None
    assert get_batch_handler(RESUME_HANDLER) is None


# --- internal steps ------------------------------------------------------------------------------
INTERNAL_STEPS = [
    {"action_type": "add_tag", "config": {"tag": "{{ trigger.tag }}"}},
    {
        "action_type": "update_contact",
        "config": {"fields": {"last_name": "{{ trigger.surname }}"}, "custom_fields": {"plan": "{{ trigger.plan }}"}},
    },
    {"action_type": "remove_tag", "config": {"tag": "old"}},
    {"action_type": "wait", "config": {"duration": 3600}},
    {"action_type": "add_tag", "config": {"tag": "after-the-wait"}},
]


def _same_shape(value: Any, contact_id: int) -> Any:
    """A run's data with what differs between two runs of the same input (its contact's id, times) masked."""
    if isinstance(value, dict):
        return {k: ("<time>" if k == "resume_at" else _same_shape(v, contact_id)) for k, v in value.items()}
    if isinstance(value, list):
        return [_same_shape(v, contact_id) for v in value]
    return "<contact>" if value == contact_id and not isinstance(value, bool) else value


def snapshot(run: WorkflowExecution) -> dict[str, Any]:
    """Everything a step leaves behind for one run, comparable between two runs of the same input."""
    run.refresh_from_db()
    contact = Contact.objects.get(pk=run.contact_id)
    next_job = Job.objects.get(pk=run.next_job_id) if run.next_job_id else None
    entries = ExecutionLog.objects.filter(execution=run).order_by("id")
    return {
        "status": run.status,
        "step": run.current_step_index,
        "retry_count": run.retry_count,
        "last_error": run.last_error,
        "waiting": run.resume_at is not None,
        "context": _same_shape(run.context, contact.pk),
        "logs": [
            (
                e.step_index,
                e.step_name,
                e.action_type,
                e.attempt_number,
                e.outcome,
                e.error_category,
                e.error_details,
                _same_shape(e.response_data, contact.pk),
            )
            for e in entries
        ],
        "next_job": next_job
        and (next_job.handler, next_job.status, next_job.queue, next_job.account_id, next_job.payload),
        "contact": (sorted(contact.tags), contact.last_name, contact.custom_fields),
    }


def test_internal_steps_of_several_runs_end_as_run_step_leaves_them(account):
    """Three runs go through their internal steps in batches; three twins with the same input go one by one."""
    workflow = make_workflow(account, INTERNAL_STEPS)
    inputs = [{"tag": f"t{i}", "surname": f"Surname {i}", "plan": f"plan-{i}"} for i in range(3)]
    batched = [start(workflow, ContactFactory(account=account, tags=["old", "x"]), **t) for t in inputs]
    alone = [start(workflow, ContactFactory(account=account, tags=["old", "x"]), **t) for t in inputs]
    for step in range(4):  # add_tag, update_contact, remove_tag, wait
        claimed = claim()
        assert len(claimed) == 6, step
        batch = items_of(claimed, *batched)
        assert run_steps(batch) == []  # all carried out: nothing left
        assert all(job.completed_in_transaction for _payload, job in batch)  # completed with their step
        one_by_one(items_of(claimed, *alone))
        for run in batched:
            assert len(logs(run)) == step + 1  # one log row per step, no more
    for batch_run, alone_run in zip(batched, alone, strict=True):
        expected = snapshot(alone_run)
        assert snapshot(batch_run) == {
            **expected,
            "next_job": (RESUME_HANDLER, "pending", "workflows", account.pk, {"execution_id": str(batch_run.pk)}),
        }
        assert expected["next_job"][4] == {"execution_id": str(alone_run.pk)}
        batch_run.refresh_from_db()
        alone_run.refresh_from_db()
        assert abs((batch_run.resume_at - alone_run.resume_at).total_seconds()) < 30
    first = snapshot(batched[0])
    assert first["status"] == "waiting"
    assert first["step"] == 4
    assert [entry[4] for entry in first["logs"]] == ["succeeded"] * 4
    assert first["contact"] == (["t0", "x"], "Surname 0", {"plan": "plan-0"})
    # The batches' own jobs completed (once: attempt 1), and nothing else is due.
    assert set(Job.objects.filter(handler=STEP_HANDLER).values_list("status", "attempt_number")) == {("completed", 1)}
    assert claim() == []


def test_a_failing_action_rolls_the_batch_back_and_each_run_records_its_own_outcome(account):
    workflow = make_workflow(
        account,
        [
            {"action_type": "add_tag", "config": {"tag": "before"}},
            {"action_type": "update_contact", "config": {"fields": {"email": "{{ trigger.email }}"}}},
            {"action_type": "add_tag", "config": {"tag": "after"}},
        ],
    )
    contacts = [ContactFactory(account=account) for _ in range(3)]
    emails = ["one@example.com", "not-an-email", "three@example.com"]
    runs = [start(workflow, c, email=e) for c, e in zip(contacts, emails, strict=True)]
    as_worker(claim())  # add_tag "before", together
    items = claim()
    assert len(items) == 3
    jobs_before = Job.objects.count()
    left = run_steps(items)
    # The bad email refuses the whole batch: every item back, nothing stored, no job completed.
    assert ids(left) == ids(items)
    assert not any(job.completed_in_transaction for _payload, job in items)
    assert {job_status(job.id) for _payload, job in items} == {"running"}
    assert Job.objects.count() == jobs_before
    for run, contact in zip(runs, contacts, strict=True):
        assert logs(run) == [(0, "add_tag", 1, "succeeded")]
        run.refresh_from_db()
        assert (run.status, run.current_step_index) == ("queued", 1)
        assert Contact.objects.get(pk=contact.pk).email == contact.email  # the good updates rolled back too
    one_by_one(left)
    bad = runs[1]
    bad.refresh_from_db()
    assert bad.status == "failed"
    assert bad.last_error.startswith("ValidationFailure: email:")
    assert logs(bad) == [(0, "add_tag", 1, "succeeded"), (1, "update_contact", 1, "failed")]  # recorded once
    for run, email in ((runs[0], emails[0]), (runs[2], emails[2])):
        run.refresh_from_db()
        assert (run.status, run.current_step_index) == ("queued", 2)
        assert logs(run) == [(0, "add_tag", 1, "succeeded"), (1, "update_contact", 1, "succeeded")]
        assert Contact.objects.get(pk=run.contact_id).email == email
    assert {job_status(job.id) for _payload, job in items} == {"completed"}


@pytest.mark.parametrize("action", ["add_tag", "webhook"])
def test_two_runs_of_one_contact_in_a_batch_one_runs_the_other_is_left(account, sink, action):
    config = {"tag": "seen"} if action == "add_tag" else {"url": sink.url("/ok")}
    workflow = make_workflow(account, [{"action_type": action, "config": config}])
    shared, other = ContactFactory(account=account), ContactFactory(account=account)
    first, second, third = (start(workflow, c) for c in (shared, shared, other))
    items = claim()
    assert len(items) == 3
    left = run_steps(items)
    assert len(left) == 1
    [(payload, job)] = left
    assert payload["execution_id"] in (str(first.pk), str(second.pk))
    assert not job.completed_in_transaction
    assert job_status(job.id) == "running"
    ran, waiting = (first, second) if payload["execution_id"] == str(second.pk) else (second, first)
    waiting.refresh_from_db()
    assert (waiting.status, waiting.next_job_id, logs(waiting)) == ("queued", job.id, [])  # untouched
    for run in (ran, third):
        run.refresh_from_db()
        assert run.status == "completed"
        assert logs(run) == [(0, action, 1, "succeeded")]
    one_by_one(left)
    waiting.refresh_from_db()
    assert waiting.status == "completed"
    assert logs(waiting) == [(0, action, 1, "succeeded")]
    if action == "webhook":
        assert len(sink.requests_to("/ok")) == 3  # each run's webhook once
    else:
        assert Contact.objects.get(pk=shared.pk).tags == ["seen"]


@pytest.mark.parametrize("action", ["add_tag", "webhook"])
def test_a_stale_job_is_returned_untouched_and_the_others_run(account, sink, action):
    config = {"tag": "seen"} if action == "add_tag" else {"url": sink.url("/ok")}
    workflow = make_workflow(account, [{"action_type": action, "config": config}])
    stale_run, other = (start(workflow, ContactFactory(account=account)) for _ in range(2))
    stale_job = stale_run.next_job_id
    items = claim()
    assert len(items) == 2
    holder = uuid.uuid4()  # the run has moved on: another job holds its next move now
    WorkflowExecution.objects.filter(pk=stale_run.pk).update(next_job_id=holder)
    left = run_steps(items)
    assert ids(left) == {stale_job}
    assert not left[0][1].completed_in_transaction
    assert job_status(stale_job) == "running"
    stale_run.refresh_from_db()
    assert (stale_run.status, stale_run.next_job_id, logs(stale_run)) == ("queued", holder, [])
    other.refresh_from_db()
    assert (other.status, logs(other)) == ("completed", [(0, action, 1, "succeeded")])
    one_by_one(left)  # run_step finds it stale too: it does nothing, and the worker acknowledges it
    assert job_status(stale_job) == "completed"
    stale_run.refresh_from_db()
    assert (stale_run.status, logs(stale_run)) == ("queued", [])
    if action == "webhook":
        assert len(sink.requests_to("/ok")) == 1  # the stale job never called out


@pytest.mark.parametrize("action", ["add_tag", "webhook"])
def test_a_duplicate_job_of_a_run_in_the_batch_changes_nothing(account, sink, action):
    config = {"tag": "seen"} if action == "add_tag" else {"url": sink.url("/ok")}
    workflow = make_workflow(account, [{"action_type": action, "config": config}])
    run, other = (start(workflow, ContactFactory(account=account)) for _ in range(2))
    payload = {"execution_id": str(run.pk), "step_index": 0, "version_id": str(run.version_id)}
    duplicate = enqueue(STEP_HANDLER, payload, queue="workflows")  # same run and step, not the job it names
    items = claim()
    assert len(items) == 3
    as_worker(items)
    for each in (run, other):
        each.refresh_from_db()
        assert each.status == "completed"
        assert logs(each) == [(0, action, 1, "succeeded")]
    assert job_status(duplicate.pk) == "completed"
    if action == "webhook":
        assert len(sink.requests_to("/ok")) == 2


@pytest.mark.parametrize("action", ["add_tag", "webhook"])
def test_a_batch_of_only_stale_jobs_returns_them_all(account, sink, action):
    """Every job of the batch is stale (the runs moved on): nothing to carry out, everything returned."""
    config = {"tag": "seen"} if action == "add_tag" else {"url": sink.url("/ok")}
    workflow = make_workflow(account, [{"action_type": action, "config": config}])
    runs = [start(workflow, ContactFactory(account=account)) for _ in range(2)]
    one_by_one(claim())  # the runs complete
    for run in runs:
        payload = {"execution_id": str(run.pk), "step_index": 0, "version_id": str(run.version_id)}
        enqueue(STEP_HANDLER, payload, queue="workflows")
    items = claim()
    assert len(items) == 2
    left = run_steps(items)
    assert ids(left) == ids(items)
    assert {job_status(job.id) for _payload, job in items} == {"running"}


def test_paused_cancelled_and_unhinted_jobs_are_left_to_run_step(account):
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "seen"}}])
    plain, paused, cancelled, unhinted = (start(workflow, ContactFactory(account=account)) for _ in range(4))
    # Paused and cancelled while their jobs were already claimed (the jobs still name them).
    WorkflowExecution.objects.filter(pk=paused.pk).update(status="paused", paused_from="queued")
    WorkflowExecution.objects.filter(pk=cancelled.pk).update(status="cancelled", completed_at=timezone.now())
    Job.objects.filter(pk=unhinted.next_job_id).update(
        payload={"execution_id": str(unhinted.pk), "step_index": 0}  # queued before the version hint existed
    )
    items = claim()
    assert len(items) == 4
    left = run_steps(items)
    assert {payload["execution_id"] for payload, _job in left} == {str(r.pk) for r in (paused, cancelled, unhinted)}
    plain.refresh_from_db()
    assert (plain.status, logs(plain)) == ("completed", [(0, "add_tag", 1, "succeeded")])
    for run in (paused, cancelled, unhinted):
        assert logs(run) == []
    one_by_one(left)
    for run in (paused, cancelled, unhinted):
        run.refresh_from_db()
    assert (paused.status, paused.next_job_id) == ("paused", None)  # let go of the step, resume queues it again
    assert (cancelled.status, logs(cancelled)) == ("cancelled", [])
    assert (unhinted.status, logs(unhinted)) == ("completed", [(0, "add_tag", 1, "succeeded")])
    assert {job_status(job.id) for _payload, job in items} == {"completed"}


def test_a_lone_internal_step_beside_external_ones_is_left_to_run_step(account, sink):
    tagging = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "seen"}}], name="tag")
    calling = make_workflow(account, [{"action_type": "webhook", "config": {"url": sink.url("/ok")}}], name="call")
    tag_run = start(tagging, ContactFactory(account=account))
    call_runs = [start(calling, ContactFactory(account=account)) for _ in range(2)]
    items = claim()
    left = run_steps(items)
    assert {payload["execution_id"] for payload, _job in left} == {str(tag_run.pk)}
    for run in call_runs:
        run.refresh_from_db()
        assert run.status == "completed"
    tag_run.refresh_from_db()
    assert tag_run.status == "queued"


# --- external steps ------------------------------------------------------------------------------
def test_webhooks_in_a_batch_each_record_their_own_outcome(account, sink):
    workflow = make_workflow(
        account,
        [
            {"action_type": "webhook", "config": {"url": sink.url("/status/{{ trigger.code }}")}},
            {"action_type": "add_tag", "config": {"tag": "next"}},
        ],
    )
    codes = [200, 503, 200, 200]
    runs = [start(workflow, ContactFactory(account=account), code=c) for c in codes]
    items = claim()
    assert len(items) == 4
    before = timezone.now()
    assert run_steps(items) == []
    assert all(job.completed_in_transaction for _payload, job in items)
    assert len(sink.requests_to("/status/200")) == 3
    assert len(sink.requests_to("/status/503")) == 1
    for run, code in zip(runs, codes, strict=True):
        run.refresh_from_db()
        next_job = Job.objects.get(pk=run.next_job_id)
        assert (next_job.handler, next_job.status) == (STEP_HANDLER, "pending")
        if code == 200:
            assert logs(run) == [(0, "webhook", 1, "succeeded")]
            assert (run.status, run.current_step_index, run.retry_count) == ("queued", 1, 0)
            assert next_job.payload["step_index"] == 1
            assert next_job.run_at <= timezone.now()
            assert run.context["steps"][0]["status_code"] == 200
        else:
            assert logs(run) == [(0, "webhook", 1, "retrying")]
            assert (run.status, run.current_step_index, run.retry_count) == ("queued", 0, 1)
            assert run.last_error_category == "server_error"
            assert next_job.payload["step_index"] == 0
            assert 50 <= (next_job.run_at - before).total_seconds() <= 70  # the retry at its backoff
            entry = ExecutionLog.objects.get(execution=run)
            assert entry.response_data["status_code"] == 503
    assert set(Job.objects.filter(pk__in=ids(items)).values_list("status", flat=True)) == {"completed"}


def test_a_lost_lease_costs_only_its_own_outcome(account, sink):
    """Recording together fails (one job is no longer held): each is recorded on its own, as run_step would."""
    workflow = make_workflow(account, [{"action_type": "webhook", "config": {"url": sink.url("/ok")}}])
    runs = [start(workflow, ContactFactory(account=account)) for _ in range(3)]
    items = claim()
    lost_run = runs[1]
    Job.objects.filter(pk=lost_run.next_job_id).update(worker_id="another-worker")  # its lease passed meanwhile
    assert run_steps(items) == []
    assert len(sink.requests_to("/ok")) == 3  # every action ran
    for run in (runs[0], runs[2]):
        run.refresh_from_db()
        assert run.status == "completed"
        assert logs(run) == [(0, "webhook", 1, "succeeded")]
    lost_run.refresh_from_db()
    assert lost_run.status == "active"  # its outcome is discarded: the job's new holder runs the step again
    assert logs(lost_run) == []
    assert Job.objects.values_list("status", "worker_id").get(pk=lost_run.next_job_id) == (
        "running",
        "another-worker",
    )
    held = [job for _payload, job in items if job.id != lost_run.next_job_id]
    assert all(job.completed_in_transaction for job in held)
    assert {job_status(job.id) for job in held} == {"completed"}


@pytest.mark.postgres
def test_an_outcome_the_database_refuses_costs_only_its_own_step(account, sink, log_rows_refused_when_secret):
    workflow = make_workflow(
        account,
        [{"action_type": "webhook", "config": {"url": sink.url("/echo"), "body": {"note": "{{ trigger.note }}"}}}],
    )
    notes = ["fine", "SECRET", "fine too"]
    runs = [start(workflow, ContactFactory(account=account), note=n) for n in notes]
    items = claim()
    assert run_steps(items) == []
    assert len(sink.requests_to("/echo")) == 3  # each action once: recording again does not call out again
    outcomes = {}
    for run, note in zip(runs, notes, strict=True):
        run.refresh_from_db()
        outcomes[note] = (run.status, logs(run))
    assert outcomes == {
        "fine": ("completed", [(0, "webhook", 1, "succeeded")]),
        "SECRET": ("failed", [(0, "webhook", 1, "failed")]),
        "fine too": ("completed", [(0, "webhook", 1, "succeeded")]),
    }
    assert runs[1].last_error.startswith("OutcomeNotStored: ")
    assert {job_status(job.id) for _payload, job in items} == {"completed"}


class PausingSink(HttpSink):
    """/pause/<contact id>: the receiver pauses that contact's run while answering 200; /pass/<id>: 200."""

    def answer(self, handler, request) -> None:
        if request.path.startswith("/pass/"):
            handler.reply(200, b'{"ok": true}')
            return
        if request.path.startswith("/pause/"):
            contact_id = int(request.path.rsplit("/", 1)[1])

            def pause() -> None:
                try:
                    run_id = WorkflowExecution.objects.values_list("pk", flat=True).get(contact_id=contact_id)
                    pause_run(execution_id=run_id)
                finally:
                    connection.close()

            thread = threading.Thread(target=pause)
            thread.start()
            thread.join(10)
            handler.reply(200, b'{"ok": true}')
            return
        super().answer(handler, request)


def test_a_pause_while_a_batched_webhook_is_in_flight_records_the_step_and_holds_the_next(account):
    sink = PausingSink().start()
    try:
        workflow = make_workflow(
            account,
            [
                {"action_type": "webhook", "config": {"url": sink.url("/{{ trigger.then }}/{{ contact.id }}")}},
                {"action_type": "add_tag", "config": {"tag": "next"}},
            ],
        )
        paused = start(workflow, ContactFactory(account=account), then="pause")
        other = start(workflow, ContactFactory(account=account), then="pass")
        items = claim()
        assert len(items) == 2
        assert run_steps(items) == []
        assert sorted(r.path.split("/")[1] for r in sink.requests) == ["pass", "pause"]
    finally:
        sink.stop()
    paused.refresh_from_db()
    assert paused.status == "paused"
    assert paused.current_step_index == 1  # the step in flight is done and logged
    assert paused.next_job_id is None  # nothing queued while paused
    assert logs(paused) == [(0, "webhook", 1, "succeeded")]
    other.refresh_from_db()
    assert (other.status, other.current_step_index) == ("queued", 1)
    assert job_status(other.next_job_id) == "pending"
    assert {job_status(job.id) for _payload, job in items} == {"completed"}
    resume_run(execution_id=paused.pk)
    paused.refresh_from_db()
    assert (paused.status, job_status(paused.next_job_id)) == ("queued", "pending")


# --- through the worker ----------------------------------------------------------------------------
def test_a_worker_carries_many_runs_through_the_batch_handler(account, sink):
    """The in-process worker claims steps together: every run completes with one log row per step, and
    runs shared a batch (their log rows share the batch's clock reading; run_step reads its own)."""
    workflow = make_workflow(
        account,
        [
            {"action_type": "add_tag", "config": {"tag": "a"}},
            {"action_type": "update_contact", "config": {"custom_fields": {"n": "{{ contact.id }}"}}},
            {"action_type": "webhook", "config": {"url": sink.url("/ok")}},
            {"action_type": "remove_tag", "config": {"tag": "a"}},
        ],
    )
    contacts = ContactFactory.create_batch(6, account=account)
    started = start_runs(workflow_id=workflow.pk, contact_ids=[c.pk for c in contacts])
    worker = Worker(queues=["workflows"], concurrency=1, burst=True, install_signal_handlers=False)
    assert worker.run() == 0
    runs = WorkflowExecution.objects.filter(pk__in=started.execution_ids)
    assert sorted(runs.values_list("status", flat=True)) == ["completed"] * 6
    for run in runs:
        assert logs(run) == [
            (0, "add_tag", 1, "succeeded"),
            (1, "update_contact", 1, "succeeded"),
            (2, "webhook", 1, "succeeded"),
            (3, "remove_tag", 1, "succeeded"),
        ]
        contact = Contact.objects.get(pk=run.contact_id)
        assert (contact.tags, contact.custom_fields) == ([], {"n": str(contact.pk)})
    assert len(sink.requests_to("/ok")) == 6
    assert set(Job.objects.values_list("status", "attempt_number")) == {("completed", 1)}
    for step in range(4):
        times = ExecutionLog.objects.filter(step_index=step).values_list("started_at", flat=True)
        assert len(set(times)) < len(times), f"step {step} never ran in a batch"


@pytest.mark.parametrize(
    "first_step",
    [
        {"action_type": "add_tag", "config": {"tag": "batched"}},
        # The batch locked and read the contact: the contacts service writes without reading it again.
        {"action_type": "update_contact", "config": {"fields": {"first_name": "Ada"}, "custom_fields": {"n": 1}}},
    ],
    ids=["add_tag", "update_contact"],
)
def test_a_batch_costs_a_few_statements_plus_each_action_s_own(account, first_step):
    """A regression guard for what batching is for; bench/workflow_throughput.py measures the speed itself.

    Ten runs at an add_tag or update_contact step: on PostgreSQL, lock the runs, lock their contacts, per
    run the change's one statement, the event's trigger lookup and the engine's check whether the account has
    event waits or goals (a worker answers both from its cache; this test process has no listener), then
    complete the jobs with the next ones queued, and record the runs and their log rows. SQLite writes runs,
    log rows and jobs one statement each, so it gets its own bound; transaction control is not counted.
    """
    from django.test.utils import CaptureQueriesContext

    workflow = make_workflow(account, [first_step, {"action_type": "add_tag", "config": {"tag": "b"}}])
    runs = [start(workflow, ContactFactory(account=account)) for _ in range(10)]
    items = claim()
    assert len(items) == 10
    with CaptureQueriesContext(connection) as queries:
        left = run_steps(items)
    assert left == []
    counted = [
        q["sql"]
        for q in queries.captured_queries
        if not q["sql"].upper().startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE"))
    ]
    limit = 4 + 3 * len(runs) if connection.vendor == "postgresql" else 2 + 8 * len(runs)
    assert len(counted) <= limit, counted
    assert ExecutionLog.objects.filter(execution__in=runs, outcome="succeeded").count() == 10
    if first_step["action_type"] == "update_contact":
        assert set(Contact.objects.filter(account=account).values_list("first_name", "custom_fields__n")) == {
            ("Ada", 1)
        }
    assert Job.objects.filter(handler=STEP_HANDLER, status="pending").count() == 10


def test_no_external_action_starts_after_the_batch_s_time_is_up(account, sink, monkeypatch):
    """A batch stops starting actions past EXTERNAL_BATCH_SECONDS: what is left (marked ACTIVE, not yet
    called) runs one by one, each action once."""
    from workflows.application.runs import batches

    monkeypatch.setattr(batches, "EXTERNAL_BATCH_SECONDS", 0.0)
    workflow = make_workflow(account, [{"action_type": "webhook", "config": {"url": sink.url("/ok")}}])
    runs = [start(workflow, ContactFactory(account=account)) for _ in range(3)]
    items = claim()
    left = run_steps(items)
    assert ids(left) == ids(items)
    assert sink.requests_to("/ok") == []  # nothing called out in the batch
    one_by_one(left)
    assert len(sink.requests_to("/ok")) == 3
    for run in runs:
        run.refresh_from_db()
        assert run.status == "completed"
        assert logs(run) == [(0, "webhook", 1, "succeeded")]


def test_what_took_effect_is_recorded_before_an_error_in_the_batch_goes_on(account, sink, monkeypatch):
    """An infrastructure error after some actions ran: those are recorded at once (their jobs complete), and
    the error goes on to the worker, which runs the rest one by one; no action runs twice."""
    from workflows.application.runs import batches

    workflow = make_workflow(account, [{"action_type": "webhook", "config": {"url": sink.url("/ok")}}])
    runs = [start(workflow, ContactFactory(account=account)) for _ in range(3)]
    items = claim()
    real_step_run = batches.step_run
    calls = []

    def failing_on_the_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the version cache is away")
        return real_step_run(*args, **kwargs)

    monkeypatch.setattr(batches, "step_run", failing_on_the_second)
    with pytest.raises(RuntimeError):
        run_steps(items)
    monkeypatch.setattr(batches, "step_run", real_step_run)
    done = [item for item in items if item[1].completed_in_transaction]
    assert len(done) == 1
    assert len(sink.requests_to("/ok")) == 1
    one_by_one([item for item in items if not item[1].completed_in_transaction])
    assert len(sink.requests_to("/ok")) == 3
    for run in runs:
        run.refresh_from_db()
        assert (run.status, logs(run)) == ("completed", [(0, "webhook", 1, "succeeded")])
