"""Enrolling a list of contacts (an import) into a workflow, on the queue, at the pace the account allows.

Each `workflows.enroll_contacts` job starts one chunk through the bulk start (`start_runs`:
the re-enrollment rule, the chain guard and the account's limit of runs in progress, all or nothing per
chunk), then queues the next chunk in the same transaction. A chunk that does not fit under the account's
limit shrinks to what fits; when nothing fits the next job waits a few seconds, as runs in flight finish.
So 200,000 contacts enroll without a request held open and without pushing the account past its limit.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction

from contacts.application.imports import import_note_follow_up, imported_contact_ids
from jobs.public import JobContext, JobSpec, job_handler
from jobs.public.storage import database_now
from workflows.application.runs.starting import start_runs
from workflows.domain.errors import ConcurrentExecutionLimitError, WorkflowDomainError
from workflows.infrastructure.models import TriggerSource, Workflow

ENROLL_HANDLER = "workflows.enroll_contacts"
CHUNK = 500
WAIT_FOR_ROOM_SECONDS = 5.0


def enrollment_job(
    *, account_id: int, workflow_id: int, import_id: int, started_by_id: int | None, offset: int = 0
) -> JobSpec:
    """The job that enrolls an import's contacts from `offset` on."""
    return JobSpec(
        ENROLL_HANDLER,
        {
            "account_id": account_id,
            "workflow_id": workflow_id,
            "import_id": import_id,
            "offset": offset,
            "started_by_id": started_by_id,
            "started": 0,
            "skipped": 0,
        },
        account=account_id,
    )


@job_handler(ENROLL_HANDLER)
def enroll_contacts(payload: dict[str, Any], job: JobContext) -> None:
    account_id, import_id = int(payload["account_id"]), int(payload["import_id"])
    ids = imported_contact_ids(import_id=import_id, account_id=account_id)
    offset, started, skipped = int(payload["offset"]), int(payload.get("started", 0)), int(payload.get("skipped", 0))
    name = Workflow.objects.filter(pk=payload["workflow_id"]).values_list("name", flat=True).first() or "?"
    chunk = ids[offset : offset + CHUNK]
    with transaction.atomic():
        done = 0
        try:
            result = start_runs(
                workflow_id=int(payload["workflow_id"]),
                contact_ids=chunk,
                account_id=account_id,
                source=TriggerSource.MANUAL,
                started_by_id=payload.get("started_by_id"),
            )
            done = len(chunk)
            started += len(result.execution_ids)
            skipped += len(result.skipped)
        except ConcurrentExecutionLimitError as exc:
            room = max(exc.limit - exc.in_progress, 0)
            if room:
                result = start_runs(
                    workflow_id=int(payload["workflow_id"]),
                    contact_ids=chunk[:room],
                    account_id=account_id,
                    source=TriggerSource.MANUAL,
                    started_by_id=payload.get("started_by_id"),
                )
                done = room
                started += len(result.execution_ids)
                skipped += len(result.skipped)
        except WorkflowDomainError as exc:
            import_note_follow_up(import_id=import_id, text=f"Not enrolled into “{name}”: {exc}")
            job.mark_completed()
            return
        offset += done
        if offset >= len(ids):
            note = f"Enrolled {started:,} contacts into “{name}”"
            tail = f"; {skipped:,} skipped (already enrolled)." if skipped else "."
            import_note_follow_up(import_id=import_id, text=note + tail)
            job.mark_completed()
            return
        import_note_follow_up(
            import_id=import_id, text=f"Enrolling into “{name}”: {offset:,} of {len(ids):,} contacts so far."
        )
        following = JobSpec(
            ENROLL_HANDLER,
            {**payload, "offset": offset, "started": started, "skipped": skipped},
            account=account_id,
            run_at=None if done else database_now() + timedelta(seconds=WAIT_FOR_ROOM_SECONDS),  # the queue's clock
        )
        job.mark_completed(then=[following])
