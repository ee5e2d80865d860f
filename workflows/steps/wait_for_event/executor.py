"""Begin the wait for the event (its row in the wait store, and the timeout's job), or, when the step runs again
while its wait is pending, end it if the event came or the time is up."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from workflows.application.actions import ActionResult, StepRun
from workflows.domain.waits import resolve as resolve_wait
from workflows.infrastructure.waits import WaitStore
from workflows.steps.wait_for_event.config import WaitForEventConfig


class WaitForEventStep:
    """Wait until the event happens to the contact, or the timeout: the run stays on this step, WAITING.

    Carried out when the run reaches the step (the wait begins: its row in the wait store, and the timeout's
    job), and again whenever the step is run while its wait is pending (a resume after a pause, a retry):
    then the wait store says whether the event came (remembered while paused) or the time is up, and the
    run goes on (`next`, or `on_timeout`), or it waits the remainder. An event or the timeout that comes
    while the run waits is handled by `runs.waiting`, without running the step again.
    """

    action_type = "wait_for_event"
    external = False

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(WaitForEventConfig, run.step.config)
        store = WaitStore()
        wait = store.lock(run.execution_id)
        if wait is not None and wait.step_key == run.step.key:
            outcome = resolve_wait(wait.recorded, wait.timeout_at, run.now)
            if outcome is not None:
                store.forget(run.execution_id)
                return ActionResult(
                    outcome.result(),
                    next_key=None if outcome.happened else config.on_timeout,
                    decision=outcome.decision(),
                )
            until = wait.timeout_at  # the remainder
        else:
            until = run.now + timedelta(seconds=config.timeout)
            store.begin(
                execution_id=run.execution_id,
                account_id=run.account_id,
                contact_id=run.contact_id,
                event=config.event,
                match=dict(config.match or {}),
                step_key=run.step.key,
                timeout_at=until,
            )
        return ActionResult({"waiting_for": config.event, "timeout_at": until.isoformat()}, event_wait_until=until)


EXECUTOR = WaitForEventStep()
