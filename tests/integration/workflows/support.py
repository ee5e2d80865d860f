"""Helpers for the workflow engine's integration and end-to-end tests.

`run_due_jobs` runs due jobs in this thread exactly as a worker does (claim,
call the handler with a real JobContext, acknowledge), so a test can step a
run forward deterministically and count its queries. A claim commits on its
own, so tests that run jobs use `django_db(transaction=True)`. `WebhookServer` is a
real HTTP server on 127.0.0.1 whose answers a test scripts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from jobs.application.context import context_for
from jobs.application.registry import get_handler
from jobs.infrastructure.models import Job
from jobs.infrastructure.store import Finished, get_store
from workflows.application.workflows import WorkflowService
from workflows.infrastructure.models import Workflow

TEST_WORKER = "test-worker"


def make_workflow(
    account,
    steps: Sequence[dict[str, Any]],
    *,
    trigger: dict[str, Any] | None = None,
    reenrollment: str = "always",
    publish: bool = True,
    name: str = "Test workflow",
) -> Workflow:
    service = WorkflowService()
    workflow = service.create(
        account_id=account.pk, name=name, trigger=trigger, reenrollment=reenrollment, steps=list(steps)
    )
    if publish:
        service.publish(workflow_id=workflow.pk)
        workflow.refresh_from_db()
    return workflow


def move_outboxes() -> int:
    """What a worker's outbox thread does (the queue in its own database): move committed outbox rows to
    the queue; returns how many. Nothing to do with one database."""
    from django.db import DEFAULT_DB_ALIAS

    from jobs.application.outbox import move_batch
    from jobs.infrastructure.database import is_split, queue_database
    from jobs.infrastructure.store import private_connection

    if not is_split():
        return 0
    source, queue = private_connection(DEFAULT_DB_ALIAS), private_connection(queue_database())
    try:
        moved = total = move_batch(source, queue)
        while moved:
            moved = move_batch(source, queue)
            total += moved
        return total
    finally:
        source.close()
        queue.close()


def run_due_jobs(limit: int = 100, *, handler: str | None = None) -> int:
    """Run up to `limit` due jobs in this thread, one at a time; return how many ran (with the queue in its
    own database, what steps queued through the outbox is moved first, as a worker would)."""
    store = get_store()
    ran = 0
    while ran < limit:
        move_outboxes()
        batch = store.claim(TEST_WORKER, None, 1, 60)
        if not batch:
            return ran
        claimed = batch[0]
        if handler is not None and claimed.handler != handler:
            store.release(TEST_WORKER, [claimed.id])
            return ran
        context = context_for(claimed, store, TEST_WORKER)
        get_handler(claimed.handler)(claimed.payload, context)
        if not context.completed_in_transaction:
            store.complete(TEST_WORKER, [Finished(claimed.id, claimed.attempt_number, context.started, time.time())])
        ran += 1
    return ran


def log_rows(run) -> list[tuple]:
    """(step index, action type, attempt, outcome) of each of the run's log rows, in order."""
    from workflows.infrastructure.models import ExecutionLog

    return list(
        ExecutionLog.objects.filter(execution=run)
        .order_by("id")
        .values_list("step_index", "action_type", "attempt_number", "outcome")
    )


def make_due(job_id) -> None:
    """Bring a job's due time to now (a retry's backoff, a wait), so run_due_jobs picks it up."""
    Job.objects.filter(pk=job_id).update(run_at="2000-01-01T00:00:00Z")


def end_wait_now(execution_id) -> None:
    """Bring a waiting run's resume_at (and the job due then) to now."""
    from workflows.infrastructure.models import WorkflowExecution

    past = "2000-01-01T00:00:00Z"
    run = WorkflowExecution.objects.get(pk=execution_id)
    WorkflowExecution.objects.filter(pk=execution_id).update(resume_at=past)
    make_due(run.next_job_id)


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float


@dataclass
class WebhookServer:
    """Answers each request with the next scripted (status, headers, body); the last answer repeats."""

    answers: list[tuple[int, dict[str, str], str]] = field(default_factory=lambda: [(200, {}, '{"ok": true}')])
    received: list[Received] = field(default_factory=list)

    def start(self) -> WebhookServer:
        server_self = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                with server_self._lock:
                    server_self.received.append(
                        Received(self.command, self.path, dict(self.headers.items()), body, time.time())
                    )
                    index = min(len(server_self.received), len(server_self.answers)) - 1
                    status, headers, text = server_self.answers[index]
                payload = text.encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        host, port = cast(tuple[str, int], self._server.server_address[:2])  # an AF_INET server
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


SALE_EMAIL_STEP = {  # one tracked link, one mailto link (never tracked)
    "action_type": "send_email",
    "config": {
        "subject": "Spring sale",
        "text": "Hello {{ contact.first_name }}, the sale: https://shop.example/sale?x=1&y=2.",
        "html": '<html><body><p>Hello, <a href="https://shop.example/sale?x=1&amp;y=2">the sale</a>'
        ' and <a href="mailto:help@shop.example">help</a></p></body></html>',
    },
}


def click_flow(timeout: float) -> list[dict]:
    """Email, wait up to `timeout` s for a click on it, then branch: tag `engaged`, or send a reminder."""
    return [
        {"key": "welcome", **SALE_EMAIL_STEP},
        {
            "key": "wait_click",
            "action_type": "wait_for_event",
            "config": {
                "event": "email.clicked",
                "match": {"step": "welcome"},
                "timeout": timeout,
                "on_timeout": "decide",
            },
            "next": "decide",
        },
        {
            "key": "decide",
            "action_type": "branch",
            "config": {
                "branches": [
                    {
                        "name": "Clicked",
                        "conditions": [{"field": "steps.welcome.clicked", "op": "equals", "value": True}],
                        "next": "tag_engaged",
                    }
                ],
                "default": "reminder",
            },
        },
        {"key": "tag_engaged", "action_type": "add_tag", "config": {"tag": "engaged"}, "next": "$end"},
        {"key": "reminder", "action_type": "send_email", "config": {"subject": "Reminder", "text": "Still on: sale."}},
    ]


def waiting_workflow(account, name: str = "Waits"):
    """A workflow that waits for the tag gold: tagged heard when it comes, late when an hour passes."""
    return make_workflow(
        account,
        [
            {
                "key": "wait_gold",
                "action_type": "wait_for_event",
                "config": {"event": "tag.added", "match": {"tag": "gold"}, "timeout": 3600, "on_timeout": "late"},
                "next": "heard",
            },
            {"key": "heard", "action_type": "add_tag", "config": {"tag": "heard"}, "next": "$end"},
            {"key": "late", "action_type": "add_tag", "config": {"tag": "late"}},
        ],
        name=name,
    )
