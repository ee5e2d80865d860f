"""What a stretch of queue work costs PostgreSQL: CPU, commits, WAL, heap tuples and index entries.

The anchors' `BENCH_CPU=1` split (../shared/bench-anchors/common.py `cpu_sample`/`pg_sample`), narrowed to
one database so other sessions on a shared box do not count:

- CPU from /proc: the benchmark database's client backends (found in pg_stat_activity, the harness's own
  backend left out), the worker processes (by session id), every other postgres process (background
  writers, other databases: informative only), and the machine;
- commits from pg_stat_database (this database only);
- WAL records of this database only (pg_walinspect, which reads the server's WAL): bytes, heap tuples
  written (insert, update, HOT update, row lock) and index entries per index (B-tree leaf inserts, splits
  counted once more), so "index entries per job" is counted, not inferred;
- pg_stat_user_tables deltas (tuples inserted, updated, HOT-updated, deleted) as a cross-check.

Database CPU per job is the main figure: on a shared two-core box jobs/s swings with everyone else's load,
while the backends' CPU per job hardly does.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

TICK = os.sysconf("SC_CLK_TCK")
TABLES = ("jobs_job", "jobs_lane")


def _proc_cpu(pid: int) -> tuple[int, float] | None:
    """(session id, user+system CPU seconds) of a process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            raw = fh.read()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[3]), (int(fields[11]) + int(fields[12])) / TICK


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _machine_busy() -> float:
    with open("/proc/stat") as fh:
        values = [int(x) for x in fh.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / TICK


@dataclass
class CpuSample:
    at: float
    backends: dict[int, float]  # pid -> CPU s, the database's client backends
    workers: float
    postgres_other: float
    machine: float


@dataclass
class DbSample:
    lsn: str
    commits: int
    tables: dict[str, tuple[int, ...]] = field(default_factory=dict)  # ins, upd, hot_upd, del


class PgCost:
    """Samples one database's cost; `cpu()` at the window's edges, `db()` around the work to count."""

    def __init__(self, server_url: str, database: str, worker_sids: set[int] | None = None) -> None:
        self.server_url = server_url
        self.database = database
        self.worker_sids = worker_sids or set()
        self.harness_pids: set[int] = set()

    def _connect(self, database: str | None = None):
        import psycopg

        return psycopg.connect(f"{self.server_url}/{database or self.database}", autocommit=True)

    def exclude_backend(self, pid: int) -> None:
        """The harness's own backend (it enqueues and polls the count): not the queue's work."""
        self.harness_pids.add(pid)

    def install(self) -> None:
        with self._connect() as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")

    def cpu(self) -> CpuSample:
        with self._connect() as conn:
            pids = {
                r[0]
                for r in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'"
                    " AND pid <> pg_backend_pid()",
                    [self.database],
                ).fetchall()
            } - self.harness_pids
        backends: dict[int, float] = {}
        workers = other = 0.0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            got = _proc_cpu(pid)
            if got is None:
                continue
            sid, cpu = got
            if pid in pids:
                backends[pid] = cpu
            elif sid in self.worker_sids:
                workers += cpu
            elif pid not in self.harness_pids and _comm(pid).startswith("postgres"):
                other += cpu
        return CpuSample(time.time(), backends, workers, other, _machine_busy())

    def db(self) -> DbSample:
        with self._connect() as conn:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            lsn = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
            commits = conn.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()[0]
            rows = conn.execute(
                "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables"
                " WHERE relname = ANY(%s)",
                [list(TABLES)],
            ).fetchall()
        return DbSample(lsn, commits, {r[0]: tuple(r[1:]) for r in rows})

    def flush_stats(self, conn) -> None:
        """Make a backend publish its table counters now (PostgreSQL 15 batches them up to a second)."""
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT 1")

    @staticmethod
    def cpu_per_job(a: CpuSample, b: CpuSample, jobs: int) -> dict[str, float]:
        """µs per job over [a, b]: backends that appeared in between count whole (their start-up is small)."""
        backend = sum(cpu - a.backends.get(pid, 0.0) for pid, cpu in b.backends.items())
        wall = b.at - a.at
        per = 1e6 / max(jobs, 1)
        return {
            "db_cpu_us_per_job": round(backend * per, 1),
            "worker_cpu_us_per_job": round((b.workers - a.workers) * per, 1),
            "pg_other_cpu_us_per_job": round((b.postgres_other - a.postgres_other) * per, 1),
            "machine_cores_busy": round((b.machine - a.machine) / wall, 2) if wall > 0 else 0.0,
            "db_cores": round(backend / wall, 2) if wall > 0 else 0.0,
        }

    def writes_per_job(self, a: DbSample, b: DbSample, jobs: int) -> dict[str, object]:
        """Heap tuples, index entries, WAL bytes and commits per job between two samples (this database)."""
        per = 1.0 / max(jobs, 1)
        with self._connect() as conn:
            (dboid,) = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()
            names: dict[str, str] = {}
            tables: dict[str, str] = {}  # index -> its table
            for node, rel, table in conn.execute(
                "SELECT pg_relation_filenode(c.oid)::text, c.relname, t.relname FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = i.indrelid"
                " WHERE n.nspname = 'public' AND pg_relation_filenode(c.oid) IS NOT NULL"
            ).fetchall():
                names[node] = rel
                if table:
                    tables[rel] = table
            # The first block a record touches names its relation; records of other databases are left out,
            # and commit records (no block) are counted by the transactions of ours they close.
            rows = conn.execute(
                """
                WITH r AS (
                    SELECT resource_manager AS rm, record_type AS kind, record_length AS len, xid,
                           regexp_match(block_ref, 'rel \\d+/(\\d+)/(\\d+)') AS rel
                    FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn)
                ),
                ours AS (SELECT * FROM r WHERE r.rel[1] = %s),
                xids AS (SELECT DISTINCT xid FROM ours WHERE xid <> '0')
                SELECT rm, kind, rel[2], count(*), sum(len) FROM ours GROUP BY 1, 2, 3
                UNION ALL
                SELECT rm, kind, NULL, count(*), sum(len) FROM r
                WHERE r.rel IS NULL AND r.rm = 'Transaction' AND r.xid IN (SELECT xid FROM xids)
                GROUP BY 1, 2
                """,
                [a.lsn, b.lsn, str(dboid)],
            ).fetchall()
        wal = 0
        heap: dict[str, float] = {}
        index: dict[str, float] = {}
        for rm, kind, node, count, length in rows:
            wal += int(length)
            kind = kind.split()[0]
            rel = names.get(node or "", node or "")
            if rm in ("Heap", "Heap2") and rel in TABLES:
                if kind in ("INSERT", "INSERT+INIT", "MULTI_INSERT", "MULTI_INSERT+INIT"):
                    key = "insert"
                elif kind in ("UPDATE", "UPDATE+INIT"):
                    key = "update"
                elif kind in ("HOT_UPDATE", "HOT_UPDATE+INIT"):
                    key = "hot_update"
                elif kind == "LOCK":
                    key = "lock"
                elif kind == "DELETE":
                    key = "delete"
                else:
                    continue
                heap_key = f"{rel}.{key}"
                heap[heap_key] = heap.get(heap_key, 0.0) + count
            elif rm == "Btree" and kind.startswith(("INSERT_LEAF", "INSERT_POST", "SPLIT_")):
                index[rel] = index.get(rel, 0.0) + count  # the new entry (a split logs it too)
        job_versions = sum(heap.get(f"jobs_job.{k}", 0.0) for k in ("insert", "update", "hot_update"))
        job_indexes = {k: v for k, v in index.items() if tables.get(k) == "jobs_job"}
        out: dict[str, object] = {
            "commits_per_job": round((b.commits - a.commits) * per, 4),
            "wal_bytes_per_job": round(wal * per, 1),
            "job_tuples_per_job": round(job_versions * per, 3),
            "job_index_entries_per_job": round(sum(job_indexes.values()) * per, 3),
            "lane_writes_per_job": round(sum(v for k, v in heap.items() if k.startswith("jobs_lane.")) * per, 4),
            "heap": {k: round(v * per, 4) for k, v in sorted(heap.items())},
            "index_entries": {k: round(v * per, 4) for k, v in sorted(index.items()) if v * per >= 0.005},
        }
        for table in TABLES:
            if table in a.tables and table in b.tables:
                delta = [y - x for x, y in zip(a.tables[table], b.tables[table], strict=True)]
                out[f"stat_{table}"] = dict(
                    zip(("ins", "upd", "hot_upd", "del"), (round(d * per, 4) for d in delta), strict=True)
                )
        return out
