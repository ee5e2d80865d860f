"""/api/v1/schedules: scheduled hooks defined through the API, fired by the queue's schedule, with what each
tick started visible; missed ticks fire once on catch-up and are counted."""

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from jobs.application.schedules import fire_due_schedules
from jobs.models import Job, Schedule
from tests.factories import ContactFactory
from tests.integration.api.conftest import assert_problem, error_fields
from tests.integration.workflows.support import make_workflow, run_due_jobs
from workflows.models import ScheduledHook, ScheduledHookRun, WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def every_minute_allowed(settings):
    """These tests tick every minute; the limit on how often a hook may fire has tests of its own."""
    settings.SCHEDULED_HOOK_MIN_INTERVAL_MINUTES = 0


@pytest.fixture
def workflow(account):
    return make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "weekly"}}])


def start_workflow_hook(workflow, **changes):
    return {
        "name": "Weekly nudge",
        "cron": "0 9 * * 1",
        "timezone": "Europe/Paris",
        "action": {
            "type": "start_workflow",
            "workflow": workflow.pk,
            "filter": [{"field": "tags", "op": "contains", "value": "trial"}],
            "data": {"campaign": "w1"},
        },
        **changes,
    }


def make_due(hook_id: int, ticks_ago: int = 0) -> None:
    """The hook's schedule due now, as if its tick had come (`ticks_ago` ticks ago for a per-minute cron)."""
    due = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=ticks_ago)
    Schedule.objects.filter(hook__id=hook_id).update(next_run_at=due)


def test_create_read_list_and_the_next_tick_in_its_time_zone(owner_api, workflow):
    created = owner_api.post("/api/v1/schedules", start_workflow_hook(workflow), format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert created["Location"] == f"/api/v1/schedules/{body['id']}"
    assert (body["status"], body["cron"], body["timezone"], body["missed_ticks"]) == (
        "active",
        "0 9 * * 1",
        "Europe/Paris",
        0,
    )
    assert body["action"]["type"] == "start_workflow"
    local = dt.datetime.fromisoformat(body["next_run_at"]).astimezone(ZoneInfo("Europe/Paris"))
    assert (local.weekday(), local.hour, local.minute) == (0, 9, 0)  # Monday nine o'clock in Paris
    assert owner_api.get(f"/api/v1/schedules/{body['id']}").json() == body
    assert [h["id"] for h in owner_api.get("/api/v1/schedules").json()["results"]] == [body["id"]]


def test_a_tick_starts_the_workflow_for_each_matching_contact_and_the_runs_are_visible(owner_api, account, workflow):
    trial = [ContactFactory(account=account, tags=["trial"]) for _ in range(2)]
    ContactFactory(account=account, tags=["paid"])
    hook = owner_api.post("/api/v1/schedules", start_workflow_hook(workflow, cron="* * * * *"), format="json").json()
    make_due(hook["id"])
    assert fire_due_schedules() == 1
    run_due_jobs(handler="scheduled_hook")

    runs = owner_api.get(f"/api/v1/schedules/{hook['id']}/runs").json()["results"]
    assert len(runs) == 1
    assert (runs[0]["status"], runs[0]["started"], runs[0]["missed_ticks"]) == ("succeeded", 2, 0)
    started = WorkflowExecution.objects.filter(pk__in=runs[0]["execution_ids"])
    assert sorted(started.values_list("contact_id", flat=True)) == sorted(c.pk for c in trial)
    assert set(started.values_list("trigger_source", flat=True)) == {"schedule"}
    assert started.first().context["trigger"]["campaign"] == "w1"


def test_missed_ticks_fire_once_on_catch_up_and_the_hook_shows_how_many(owner_api, account, workflow):
    ContactFactory(account=account, tags=["trial"])
    hook = owner_api.post("/api/v1/schedules", start_workflow_hook(workflow, cron="* * * * *"), format="json").json()
    make_due(hook["id"], ticks_ago=5)  # no worker ran for five minutes
    assert fire_due_schedules() == 1
    assert fire_due_schedules() == 0
    run_due_jobs(handler="scheduled_hook")
    assert owner_api.get(f"/api/v1/schedules/{hook['id']}").json()["missed_ticks"] == 5
    (run,) = owner_api.get(f"/api/v1/schedules/{hook['id']}/runs").json()["results"]
    assert (run["missed_ticks"], run["started"]) == (5, 1)
    assert WorkflowExecution.objects.count() == 1


def test_a_retried_tick_job_does_nothing_twice(owner_api, account, workflow):
    from workflows.application.scheduled_hooks import run_hook

    ContactFactory(account=account, tags=["trial"])
    hook = owner_api.post("/api/v1/schedules", start_workflow_hook(workflow), format="json").json()
    tick = timezone.now().replace(microsecond=0)
    first = run_hook(hook_id=hook["id"], tick=tick)
    assert run_hook(hook_id=hook["id"], tick=tick).pk == first.pk
    assert WorkflowExecution.objects.count() == 1


def test_post_event_and_deliver_webhook_actions(owner_api, account):
    event_workflow = make_workflow(
        account,
        [{"action_type": "add_tag", "config": {"tag": "digest"}}],
        trigger={"type": "event", "event": "weekly.digest"},
    )
    ContactFactory(account=account, tags=["vip"])
    ContactFactory(account=account)
    event_hook = owner_api.post(
        "/api/v1/schedules",
        {
            "name": "digest",
            "cron": "* * * * *",
            "action": {
                "type": "post_event",
                "event": "weekly.digest",
                "filter": [{"field": "tags", "op": "contains", "value": "vip"}],
            },
        },
        format="json",
    ).json()
    hook = owner_api.post(
        "/api/v1/schedules",
        {
            "name": "ping",
            "cron": "* * * * *",
            "action": {
                "type": "deliver_webhook",
                "url": "https://hooks.example.com/T0/SECRET?token=abc",
                "headers": {"Authorization": "Bearer SECRET"},
                "body": {"ping": True},
            },
        },
        format="json",
    ).json()
    assert hook["action"]["url"] == "https://hooks.example.com/…"
    assert "SECRET" not in str(owner_api.get(f"/api/v1/schedules/{hook['id']}").json())
    make_due(event_hook["id"])
    make_due(hook["id"])
    assert fire_due_schedules() == 2
    run_due_jobs(handler="scheduled_hook")
    run_due_jobs(handler="scheduled_hook")
    (event_run,) = ScheduledHookRun.objects.filter(hook_id=event_hook["id"])
    assert (event_run.started, len(event_run.detail["execution_ids"])) == (1, 1)
    assert WorkflowExecution.objects.get().workflow_id == event_workflow.pk
    (webhook_run,) = ScheduledHookRun.objects.filter(hook_id=hook["id"])
    assert webhook_run.status == "delivering"  # until its delivery job says how it ended
    job = Job.objects.get(pk=webhook_run.detail["webhook_job"])
    assert (job.handler, job.account_id) == ("scheduled_hook.deliver", account.pk)
    assert "SECRET" not in str(job.payload)  # the delivery reads the URL and headers from the hook


def test_pause_resume_and_delete(owner_api, workflow):
    hook = owner_api.post("/api/v1/schedules", start_workflow_hook(workflow, cron="* * * * *"), format="json").json()
    paused = owner_api.post(f"/api/v1/schedules/{hook['id']}/pause").json()
    assert (paused["status"], paused["next_run_at"]) == ("paused", None)
    make_due(hook["id"])
    assert fire_due_schedules() == 0  # a paused hook's schedule is off
    resumed = owner_api.post(f"/api/v1/schedules/{hook['id']}/resume").json()
    assert resumed["status"] == "active"
    assert dt.datetime.fromisoformat(resumed["next_run_at"]) > timezone.now()  # paused ticks are not made up
    assert owner_api.delete(f"/api/v1/schedules/{hook['id']}").status_code == 204
    assert not ScheduledHook.objects.exists()
    assert not Schedule.objects.filter(name=f"hook:{hook['id']}").exists()
    assert_problem(owner_api.get(f"/api/v1/schedules/{hook['id']}"), 404)


def test_every_problem_is_named_and_nothing_is_stored(owner_api, other_account):
    foreign = make_workflow(other_account, [{"action_type": "add_tag", "config": {"tag": "x"}}])
    body = assert_problem(
        owner_api.post(
            "/api/v1/schedules",
            {
                "name": "",
                "cron": "every monday",
                "timezone": "Mars/Olympus",
                "action": {
                    "type": "start_workflow",
                    "workflow": foreign.pk,
                    "filter": [{"field": "tags", "op": "nope"}],
                },
            },
            format="json",
        ),
        400,
    )
    assert set(error_fields(body)) == {"name", "cron", "timezone", "action.filter[0].op"}
    body = assert_problem(
        owner_api.post(
            "/api/v1/schedules",
            {"name": "x", "cron": "* * * * *", "action": {"type": "start_workflow", "workflow": foreign.pk}},
            format="json",
        ),
        400,
    )
    assert error_fields(body) == ["action.workflow"]  # another account's workflow is not this account's
    body = assert_problem(
        owner_api.post(
            "/api/v1/schedules",
            {"name": "x", "cron": "* * * * *", "action": {"type": "deliver_webhook", "url": "ftp://x", "bogus": 1}},
            format="json",
        ),
        400,
    )
    assert set(error_fields(body)) == {"action.url", "action.bogus"}
    assert not ScheduledHook.objects.exists()
    assert not Schedule.objects.filter(name__startswith="hook:").exists()


def test_hooks_are_the_accounts_own_and_viewers_only_read(api_as, owner_api, workflow, other_account):
    hook = owner_api.post("/api/v1/schedules", start_workflow_hook(workflow), format="json").json()
    stranger = api_as("owner", in_account=other_account)
    assert_problem(stranger.get(f"/api/v1/schedules/{hook['id']}"), 404)
    assert_problem(stranger.post(f"/api/v1/schedules/{hook['id']}/pause"), 404)
    assert stranger.get("/api/v1/schedules").json()["results"] == []
    viewer = api_as("viewer")
    assert viewer.get(f"/api/v1/schedules/{hook['id']}").status_code == 200
    assert_problem(viewer.post(f"/api/v1/schedules/{hook['id']}/pause"), 403)
    assert_problem(viewer.post("/api/v1/schedules", start_workflow_hook(workflow), format="json"), 403)


def test_old_tick_records_are_purged_and_the_runs_they_started_stay(owner_api, account, workflow):
    from jobs.application.schedules import sync_schedules
    from workflows.application.scheduled_hooks import hook_runs_purge, run_hook

    ContactFactory(account=account, tags=["trial"])
    hook = owner_api.post("/api/v1/schedules", start_workflow_hook(workflow), format="json").json()
    old = run_hook(hook_id=hook["id"], tick=timezone.now() - dt.timedelta(days=100))
    recent = run_hook(hook_id=hook["id"], tick=timezone.now() - dt.timedelta(days=1))
    assert hook_runs_purge(older_than_days=90) == 1
    assert list(ScheduledHookRun.objects.values_list("pk", flat=True)) == [recent.pk]
    assert WorkflowExecution.objects.filter(pk__in=old.detail["execution_ids"]).exists()
    assert hook_runs_purge(older_than_days=0) == 0  # 0: kept forever
    sync_schedules()
    assert Schedule.objects.get(name="relay.purge_hook_runs").handler == "workflows.purge_hook_runs"


@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 0 31 4,6 *"])
def test_a_cron_that_never_fires_is_a_400_naming_cron_and_nothing_is_stored(owner_api, workflow, cron):
    body = assert_problem(
        owner_api.post("/api/v1/schedules", start_workflow_hook(workflow, cron=cron), format="json"), 400
    )
    assert error_fields(body) == ["cron"]
    assert "never fires" in body["errors"][0]["message"]
    assert not ScheduledHook.objects.exists()
    assert not Schedule.objects.filter(name__startswith="hook:").exists()
