"""Per-account limits on scheduled hooks: how many an account may have, how often one may fire, and how many
contacts one tick may act on. Each refusal is a 400 naming the field and the limit (and its setting), nothing
is stored; a tick that would act on too many contacts fails as a whole, doing nothing."""

import pytest

from jobs.application.schedules import fire_due_schedules
from jobs.models import Schedule
from tests.factories import ContactFactory
from tests.integration.api.conftest import assert_problem, error_fields
from tests.integration.api.test_schedules import make_due
from tests.integration.workflows.support import make_workflow, run_due_jobs
from workflows.models import ScheduledHook, ScheduledHookRun, WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)


def event_hook(cron: str = "0 9 * * 1", **action) -> dict:
    return {"name": "digest", "cron": cron, "action": {"type": "post_event", "event": "weekly.digest", **action}}


def test_the_defaults_are_what_the_readme_says(settings):
    assert (
        settings.SCHEDULED_HOOK_MAX_PER_ACCOUNT,
        settings.SCHEDULED_HOOK_MIN_INTERVAL_MINUTES,
        settings.SCHEDULED_HOOK_MAX_CONTACTS_PER_TICK,
    ) == (50, 15, 10_000)


@pytest.mark.parametrize(("cron", "closest"), [("* * * * *", "1 minute"), ("0,5 9 * * *", "5 minutes")])
def test_a_hook_firing_more_often_than_the_default_minimum_is_a_400_naming_cron(api_as, cron, closest):
    marketer = api_as("marketer")  # marketers may create hooks: within the limits
    body = assert_problem(marketer.post("/api/v1/schedules", event_hook(cron), format="json"), 400)
    assert error_fields(body) == ["cron"]
    message = body["errors"][0]["message"]
    assert f"fires {closest} apart" in message
    assert "at most once every 15 minutes (SCHEDULED_HOOK_MIN_INTERVAL_MINUTES)" in message
    assert not ScheduledHook.objects.exists()
    assert marketer.post("/api/v1/schedules", event_hook("*/15 * * * *"), format="json").status_code == 201


def test_the_minimum_interval_is_a_setting(settings, owner_api):
    settings.SCHEDULED_HOOK_MIN_INTERVAL_MINUTES = 60
    body = assert_problem(owner_api.post("/api/v1/schedules", event_hook("*/30 * * * *"), format="json"), 400)
    assert "at most once every 60 minutes" in body["errors"][0]["message"]
    assert owner_api.post("/api/v1/schedules", event_hook("0 * * * *"), format="json").status_code == 201
    settings.SCHEDULED_HOOK_MIN_INTERVAL_MINUTES = 0  # off
    assert owner_api.post("/api/v1/schedules", event_hook("* * * * *"), format="json").status_code == 201


def test_an_account_may_have_so_many_hooks_and_another_account_is_not_counted(settings, api_as, other_account):
    settings.SCHEDULED_HOOK_MAX_PER_ACCOUNT = 3
    owner = api_as("owner")
    created = [owner.post("/api/v1/schedules", event_hook(), format="json") for _ in range(3)]
    assert [r.status_code for r in created] == [201, 201, 201]
    body = assert_problem(owner.post("/api/v1/schedules", event_hook(), format="json"), 400)
    assert error_fields(body) == [""]
    assert body["errors"][0]["message"] == (
        "this account has 3 scheduled hooks, and may have at most 3 (SCHEDULED_HOOK_MAX_PER_ACCOUNT): delete one first"
    )
    assert ScheduledHook.objects.count() == 3
    assert Schedule.objects.filter(name__startswith="hook:").count() == 3
    stranger = api_as("owner", in_account=other_account)
    assert stranger.post("/api/v1/schedules", event_hook(), format="json").status_code == 201
    assert owner.delete(f"/api/v1/schedules/{created[0].json()['id']}").status_code == 204
    assert owner.post("/api/v1/schedules", event_hook(), format="json").status_code == 201


def test_a_filter_matching_more_contacts_than_a_tick_may_act_on_is_a_400_naming_the_filter(
    settings, owner_api, account
):
    settings.SCHEDULED_HOOK_MAX_CONTACTS_PER_TICK = 3
    for _ in range(4):
        ContactFactory(account=account, tags=["vip"])
    ContactFactory(account=account, tags=["vip", "gold"])
    body = assert_problem(owner_api.post("/api/v1/schedules", event_hook(), format="json"), 400)  # no filter: all
    assert error_fields(body) == ["action.filter"]
    assert body["errors"][0]["message"] == (
        "matches more than 3 contacts, the most one tick may act on (SCHEDULED_HOOK_MAX_CONTACTS_PER_TICK): "
        "narrow the filter"
    )
    vip = [{"field": "tags", "op": "contains", "value": "vip"}]
    assert_problem(owner_api.post("/api/v1/schedules", event_hook(filter=vip), format="json"), 400)
    gold = [{"field": "tags", "op": "contains", "value": "gold"}]
    assert owner_api.post("/api/v1/schedules", event_hook(filter=gold), format="json").status_code == 201


def test_a_tick_that_would_act_on_too_many_contacts_fails_whole_and_starts_nothing(settings, owner_api, account):
    settings.SCHEDULED_HOOK_MIN_INTERVAL_MINUTES = 0
    settings.SCHEDULED_HOOK_MAX_CONTACTS_PER_TICK = 2
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "nudged"}}])
    ContactFactory(account=account, tags=["trial"])
    hook = owner_api.post(
        "/api/v1/schedules",
        {
            "name": "nudge",
            "cron": "* * * * *",
            "action": {
                "type": "start_workflow",
                "workflow": workflow.pk,
                "filter": [{"field": "tags", "op": "contains", "value": "trial"}],
            },
        },
        format="json",
    ).json()
    for _ in range(2):  # the audience grew past the limit since the hook was saved
        ContactFactory(account=account, tags=["trial"])
    make_due(hook["id"])
    assert fire_due_schedules() == 1
    run_due_jobs(handler="scheduled_hook")
    (run,) = owner_api.get(f"/api/v1/schedules/{hook['id']}/runs").json()["results"]
    assert (run["status"], run["started"]) == ("failed", 0)
    assert "SCHEDULED_HOOK_MAX_CONTACTS_PER_TICK" in run["error"]
    assert "action.filter" in run["error"]
    assert not WorkflowExecution.objects.exists()
    assert ScheduledHookRun.objects.count() == 1
