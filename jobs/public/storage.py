"""What another app's store needs of the queue's database, for the stores that read beside the queue (the
workflow engine's runs name the job that moves them).

- where the queue lives: `queue_database()`, and `is_split()` when it has a database of its own
  (JOBS_DATABASE); `held_in_outbox` says which jobs a caller's database still holds in its outbox;
- the database's clock (docs/decisions/database-clock.md): `database_now`, `transaction_now`, `now_of`, and
  `remember`, which lets a store that already read now make it its transaction's;
- `uuid7`, the time-ordered ids the queue gives jobs, for rows created beside them.
"""

from jobs.domain.ids import uuid7
from jobs.infrastructure.clock import database_now, now_of, remember, transaction_now
from jobs.infrastructure.database import is_split, queue_database
from jobs.infrastructure.outbox import held_in_outbox

__all__ = [
    "database_now",
    "held_in_outbox",
    "is_split",
    "now_of",
    "queue_database",
    "remember",
    "transaction_now",
    "uuid7",
]
