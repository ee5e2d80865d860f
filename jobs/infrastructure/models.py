"""The queue's tables. The worker never builds these objects: it reads and
writes plain rows through jobs.infrastructure.store. The ORM serves the admin,
the operator services and the API."""

from django.conf import settings
from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce

from jobs.domain.ids import uuid7
from jobs.domain.states import DUE_STATES, UNFINISHED_STATES, JobStatus

_DUE = Q(status__in=sorted(DUE_STATES))
_UNFINISHED = Q(status__in=sorted(UNFINISHED_STATES))


class Job(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    queue = models.CharField(max_length=100, default="default")
    handler = models.CharField(max_length=200)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=[(s.value, s.value) for s in JobStatus], default=JobStatus.PENDING)
    priority = models.IntegerField(default=0)  # lower runs first
    run_at = models.DateTimeField()  # due time; enqueue fills in "now" when none is given
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)  # the latest attempt's start
    completed_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)  # the latest failure
    cancelled_at = models.DateTimeField(null=True, blank=True)  # when an operator (or its owner) cancelled it
    error_message = models.TextField(blank=True, default="")  # `Type: message`, redacted, <= 1,000
    attempt_number = models.PositiveIntegerField(default=0)  # attempts started (and counted)
    max_attempts = models.PositiveIntegerField()
    retry_delay_seconds = models.FloatField(null=True, blank=True)  # the latest backoff chosen
    # How often its handler snoozed it (jobs.domain.snooze): back to pending later, each time uncounted in
    # attempt_number. A database default, so the queue's plain INSERTs (and the outbox's) need not name it, and
    # no CHECK (a PositiveIntegerField's): adding the column is then a catalogue change, no scan of the table.
    snoozes = models.IntegerField(db_default=0, default=0, editable=False)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    worker_id = models.CharField(max_length=120, blank=True, default="")
    # Foreign keys into `default`, which the queue's database may not hold (JOBS_DATABASE): no constraint, and
    # Django does nothing on delete (it would look for jobs in the deleted row's database). Deleting an account
    # or a user clears them on the queue's database instead (jobs.application.limits;
    # docs/subsystems/queue-in-its-own-database.md).
    account = models.ForeignKey(
        "accounts.Account", null=True, blank=True, on_delete=models.DO_NOTHING, db_index=False, db_constraint=False
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_index=False,
        db_constraint=False,
    )
    unique_key = models.CharField(max_length=200, null=True, blank=True)
    # The deadline to start by (enqueue's expires_at / expires_in); a due job past it is dead-lettered as
    # expired and never runs. A retry the queue plans moves it (jobs.domain.states.pushed_expiry).
    expires_at = models.DateTimeField(null=True, blank=True)
    # What a handler chose to keep (Django tasks: the return value, each attempt's error and worker).
    result = models.JSONField(null=True, blank=True)

    class Meta:
        app_label = "jobs"
        # Newest first by id: ids are uuid7, made at enqueue, so the primary key read backwards is creation
        # order (to the millisecond) and no index on created_at is needed (jobs.domain.ids).
        ordering = ["-id"]
        indexes = [
            # The claim, lane by lane (Lane): due rows only, each lane's in the order the claim takes them.
            # Finished rows are not in it, however many there are; an account's backlog is one range of it
            # that a claim never reads while the account is at its limit.
            models.Index(
                Coalesce(F("account"), Value(0)),
                F("queue"),
                F("priority"),
                F("run_at"),
                F("id"),
                condition=_DUE,
                name="job_lane_claim",
            ),
            # Running rows: per-account concurrency counts and lease rescue.
            models.Index(fields=["account"], condition=Q(status=JobStatus.RUNNING), name="job_running"),
            # An account's jobs, newest first (the API, the admin's scoped lists). Every index gets a new entry
            # at each claim and each completion (status is in other indexes' predicates, so the updates are
            # never HOT), hence the fewest indexes the reads need: the primary key serves the newest-first
            # lists across accounts and time bounds (uuid7), and jobs of no account (system jobs) skip this one.
            models.Index(fields=["account", "id"], condition=Q(account__isnull=False), name="job_account_newest"),
            # The expiry sweep: waiting jobs that have a deadline (few), in deadline order.
            models.Index(fields=["expires_at"], condition=_DUE & Q(expires_at__isnull=False), name="job_due_expiry"),
        ]
        constraints = [
            # An unfinished job holds its key; enqueueing the key again returns it. Jobs without a key (most)
            # have no entry: two index writes fewer per job (its insert and its claim).
            models.UniqueConstraint(
                fields=["unique_key"], condition=_UNFINISHED & Q(unique_key__isnull=False), name="job_unique_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.handler} {self.id} ({self.status})"

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at and self.completed_at:
            return (self.completed_at - self.started_at).total_seconds()
        return None


class Lane(models.Model):
    """A claim lane: one account's waiting jobs in one queue at one priority (PostgreSQL's claim).

    Kept in step with jobs_job by triggers (sql/lanes.sql) in the writer's own transaction: a job
    that becomes due makes sure its lane exists and is due no later than the job. The claim reads
    lanes, not jobs, to find who can run, so an account at its max_concurrent_jobs costs a claim one
    lane row however many jobs it has waiting (docs/decisions/fair-claims.md). Account 0: jobs of no account.
    """

    account_id = models.BigIntegerField()  # not a foreign key: a lane outlives nothing and blocks no delete
    queue = models.CharField(max_length=100)
    priority = models.IntegerField()
    # No due job of this lane was due before this (a lower bound the claim raises when it finds the lane empty).
    next_due_at = models.DateTimeField()
    served_at = models.DateTimeField()  # the last claim that took a job from it: round robin, oldest first

    class Meta:
        app_label = "jobs"
        constraints = [models.UniqueConstraint(fields=["account_id", "queue", "priority"], name="lane_key")]

    def __str__(self) -> str:
        return f"lane account {self.account_id} {self.queue} p{self.priority} due {self.next_due_at}"


class AccountLimit(models.Model):
    """The queue's own copy of each account's `max_concurrent_jobs`, which the claim reads.

    The queue may live in a database apart from the accounts' (JOBS_DATABASE), so it keeps the limits beside
    its jobs, in every configuration (one claim): the accounts app writes an account's limit here when it is
    created or changed (`jobs.application.limits.set_account_limit`), and every worker copies them all at
    start and every few minutes (`repair_limits`), which heals a crash between the two databases' commits.
    An account with no row runs with DEFAULT_ACCOUNT_JOB_LIMIT.
    """

    account_id = models.BigIntegerField(primary_key=True)  # not a foreign key: the account may live elsewhere
    max_concurrent_jobs = models.PositiveIntegerField()

    class Meta:
        app_label = "jobs"
        db_table = "jobs_account_limit"
        constraints = [models.CheckConstraint(condition=Q(max_concurrent_jobs__gte=1), name="account_limit_runs_a_job")]

    def __str__(self) -> str:
        return f"account {self.account_id}: at most {self.max_concurrent_jobs} running"


class OutboxJob(models.Model):
    """A job queued inside a transaction on another database than the queue's, waiting to be moved to it.

    Lives in the callers' databases, never in the queue's (JobsRouter); written and moved by plain SQL
    (jobs.infrastructure.outbox). `id` is the id the job has in the queue; due time and deadline are fixed
    at the enqueue, by the caller's database's clock.
    """

    id = models.UUIDField(primary_key=True)
    queue = models.CharField(max_length=100)
    handler = models.CharField(max_length=200)
    payload = models.TextField()  # the JSON text enqueue checked
    priority = models.IntegerField()
    run_at = models.DateTimeField()
    max_attempts = models.PositiveIntegerField()
    account_id = models.BigIntegerField(null=True)
    created_by_id = models.BigIntegerField(null=True)
    unique_key = models.CharField(max_length=200, null=True)
    expires_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField()

    class Meta:
        app_label = "jobs"
        db_table = "jobs_outbox"

    def __str__(self) -> str:
        return f"{self.handler} {self.id} (in the outbox)"


class Schedule(models.Model):
    """A cron schedule: each tick enqueues one job, once, however many workers run."""

    name = models.CharField(max_length=100, unique=True)
    cron = models.CharField(max_length=100)  # five-field cron expression, read in `timezone`
    timezone = models.CharField(max_length=64, default="UTC")  # an IANA name
    handler = models.CharField(max_length=200)
    payload = models.JSONField(default=dict, blank=True)
    queue = models.CharField(max_length=100, default="default")
    priority = models.IntegerField(default=0)
    enabled = models.BooleanField(default=True)
    next_run_at = models.DateTimeField()
    last_run_at = models.DateTimeField(null=True, blank=True)
    # Ticks that came due while no worker ran and were folded into the one fired on catch-up.
    missed_ticks = models.PositiveIntegerField(default=0)

    class Meta:
        app_label = "jobs"
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.cron})"


class MetricCounter(models.Model):
    """A counter of the Prometheus metrics, kept in the database: every process adds what it counted.

    Kept here rather than in prometheus-client's per-host multiprocess files because workers and web
    processes run on different hosts; any web process then serves the whole installation's numbers, and a
    restarted worker never resets them (docs/decisions/metrics-in-the-database.md).
    """

    name = models.CharField(max_length=100)
    labels = models.CharField(max_length=500, default="")  # canonical JSON object of the label values
    value = models.FloatField(default=0.0)

    class Meta:
        app_label = "jobs"
        constraints = [models.UniqueConstraint(fields=["name", "labels"], name="metric_counter_series")]

    def __str__(self) -> str:
        return f"{self.name}{self.labels} = {self.value:g}"


class MetricGauge(models.Model):
    """A gauge's last published numbers: one worker computes them per JOB_METRICS_INTERVAL, scrapes read them."""

    name = models.CharField(max_length=100)
    labels = models.CharField(max_length=500, default="")
    value = models.FloatField()
    computed_at = models.DateTimeField()

    class Meta:
        app_label = "jobs"
        constraints = [models.UniqueConstraint(fields=["name", "labels"], name="metric_gauge_series")]

    def __str__(self) -> str:
        return f"{self.name}{self.labels} = {self.value:g}"


class MetricRefresh(models.Model):
    """One row: when the gauges are next due. A worker takes a refresh by advancing it (compare-and-set),
    so one worker computes them per interval however many run."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    next_at = models.DateTimeField()
    last_at = models.DateTimeField(null=True, blank=True)
    last_worker = models.CharField(max_length=120, blank=True, default="")

    class Meta:
        app_label = "jobs"

    def __str__(self) -> str:
        return f"metrics refresh due {self.next_at}"
