"""The worker: claim due jobs in batches, run them, acknowledge them, stop cleanly.

One process = one worker id (`python manage.py runworker`). Its parts, one module each:

- `process`: the `Worker`, its parts put together, and the main thread (signals, ticks, exit code)
- `setup`: the listeners and the maintenance services started before the executors
- `loop`: an executor thread's claim-run-acknowledge loop, and the claim's size
- `attempts`: one job's handler run under its deadline, on the thread's own connection
- `groups`: a batch handler's jobs given to it together
- `acknowledge`: completions written in batches; what an unreachable database is owed, kept and paid
- `failures`: a failed attempt classified, decided (retry, failed, dead) and written
- `deadlines`: the handlers' deadlines, the pauses they do not count, a runaway handler
- `shutdown`: the grace period, the leftovers released, the exit (or the restart)
- `state`, `wake`: what the parts share, and how idle executors are woken

The upkeep beside the executors (rescue of expired leases, cron, vacuum, the outbox mover, limits repair,
the metrics flush) is in `jobs.application.maintenance`, one service each, which the worker only starts and
stops. docs/subsystems/worker.md tells the whole story.
"""

from jobs.application.worker.loop import ACK_DELAY_SECONDS, BATCH_TARGET_SECONDS, GROUP_TARGET_SECONDS, batch_limit
from jobs.application.worker.process import Worker
from jobs.application.worker.state import Running, new_worker_id
from jobs.application.worker.wake import WorkSignal

__all__ = [
    "ACK_DELAY_SECONDS",
    "BATCH_TARGET_SECONDS",
    "GROUP_TARGET_SECONDS",
    "Running",
    "WorkSignal",
    "Worker",
    "batch_limit",
    "new_worker_id",
]
