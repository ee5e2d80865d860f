"""The dashboard and the Prometheus gauges count the same things through the same selectors: due jobs and
the oldest one's wait, dead letters, jobs running and runs in progress per account against their limits; and
every failure rate is the one formula, (failed + dead) / (completed + failed + dead)."""

import datetime as dt

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs.application import metrics
from jobs.application.operations import job_stats
from jobs.application.queue import enqueue
from jobs.application.queue_counts import queue_overview
from jobs.infrastructure.models import Job, MetricRefresh
from tests.factories import ContactFactory
from tests.integration.workflows.support import make_workflow
from workflows.application.runs.starting import start_run
from workflows.application.stats import dashboard
from workflows.infrastructure.models import WorkflowExecution

pytestmark = pytest.mark.django_db


def _job(account, status: str, *, ago: float = 0.0, **fields) -> Job:
    when = timezone.now() - dt.timedelta(seconds=ago)
    stamps = {"completed": "completed_at", "failed": "failed_at", "dead": "failed_at"}
    if status in stamps:
        fields.setdefault(stamps[status], when)
    job = enqueue("noop", {}, account=account.pk, run_at=when)
    Job.objects.filter(pk=job.pk).update(status=status, **fields)
    return job


def _gauges() -> dict[tuple[str, tuple], float]:
    MetricRefresh.objects.filter(id=1).update(next_at=timezone.now() - dt.timedelta(days=1))
    metrics._last_try = None
    assert metrics.refresh_gauges(interval=30, worker_id="w1") is True
    found = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _runs(account, n: int, status: str = "queued") -> None:
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "x"}}])
    for _ in range(n):
        run = start_run(workflow_id=workflow.pk, contact_id=ContactFactory.create(account=account).pk).execution
        if status != "queued":
            WorkflowExecution.objects.filter(pk=run.pk).update(status=status, completed_at=timezone.now())


def test_the_dashboard_shows_what_the_gauges_count(account, other_account):
    account.max_concurrent_jobs, account.max_concurrent_executions = 7, 40
    account.save()
    _job(account, "pending", ago=120)  # due, waiting two minutes
    _job(account, "retrying", ago=5)
    _job(account, "pending", ago=-3600)  # not due yet
    _job(account, "running", worker_id="w-a")
    _job(account, "running", worker_id="w-a")
    _job(other_account, "running", worker_id="w-b")
    _job(account, "dead", ago=60)
    _job(other_account, "failed", ago=60)
    _runs(account, 3)  # three queued runs, and the three step jobs they queued (due now)
    _runs(other_account, 1)

    found = _gauges()
    data = dashboard(account_ids=None, job_account_ids=None)
    assert data.due_jobs == found[("relay_jobs_due", ())] == 2 + 4
    assert data.oldest_due_age_seconds is not None
    assert 120 <= data.oldest_due_age_seconds < 180
    assert 120 <= found[("relay_jobs_oldest_due_age_seconds", ())] < 180
    assert data.dead_letters == found[("relay_jobs_dead_lettered", ())] == 2
    usage = {u.account_id: u for u in data.usage}
    for acc, jobs, runs in ((account, 2, 3), (other_account, 1, 1)):
        label = (("account", acc.slug),)
        assert usage[acc.pk].jobs_running == found[("relay_account_running_jobs", label)] == jobs
        assert usage[acc.pk].max_jobs == found[("relay_account_running_jobs_limit", label)]
        assert usage[acc.pk].runs_in_progress == found[("relay_account_running_executions", label)] == runs
        assert usage[acc.pk].max_runs == found[("relay_account_running_executions_limit", label)]
    assert (usage[account.pk].max_jobs, usage[account.pk].max_runs) == (7, 40)


def test_the_dashboard_counts_only_the_accounts_the_user_may_see(account, other_account):
    _job(account, "pending", ago=30)
    _job(other_account, "pending", ago=300)
    _job(other_account, "dead")
    _job(other_account, "running")
    _runs(other_account, 2)

    data = dashboard(account_ids=frozenset({account.pk}), job_account_ids=frozenset({account.pk}))
    assert (data.due_jobs, data.dead_letters) == (1, 0)
    assert data.oldest_due_age_seconds is not None
    assert 30 <= data.oldest_due_age_seconds < 90  # not the other account's five minutes
    assert [(u.account_id, u.jobs_running, u.runs_in_progress) for u in data.usage] == [(account.pk, 0, 0)]
    nothing_due = dashboard(account_ids=frozenset({account.pk}), job_account_ids=frozenset())
    assert (nothing_due.due_jobs, nothing_due.oldest_due_age_seconds) == (0, None)


def test_every_failure_rate_is_the_one_formula(account):
    for _ in range(5):
        _job(account, "completed", ago=60)
    _job(account, "failed", ago=60)
    _job(account, "dead", ago=60)
    _job(account, "dead", ago=60)
    _job(account, "cancelled", ago=60)  # cancelled work counts for nothing
    _job(account, "completed", ago=3 * 86400)  # outside the dashboard's window, still in the stats
    _runs(account, 3, "completed")
    _runs(account, 1, "failed")
    _runs(account, 1, "cancelled")

    stats = job_stats(account_id=account.pk)
    assert stats.failure_rate == 3 / 9  # (1 failed + 2 dead) / (6 completed + 1 + 2), the stored jobs
    since = timezone.now() - dt.timedelta(hours=24)
    assert queue_overview(account_ids=None, since=since).failure_rate == 3 / 8
    data = dashboard(account_ids=None, job_account_ids=None)
    assert data.job_failure_rate == 3 / 8
    assert (data.finished_jobs, data.failed_jobs) == (8, 3)
    assert data.run_failure_rate == 1 / 4
    assert (data.finished_runs, data.failed_runs) == (4, 1)
    assert data.failure_rate == (3 + 1) / (8 + 4)  # both: a failed run is a failure beside the jobs'

    empty = dashboard(account_ids=frozenset(), job_account_ids=frozenset())
    assert (empty.job_failure_rate, empty.run_failure_rate, empty.failure_rate) == (None, None, None)
