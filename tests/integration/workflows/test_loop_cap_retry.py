"""An operator's retry of a run the loop cap failed: it goes on from the step it was capped at with a fresh
allowance, and its history says who lifted the cap and when. Both databases; jobs run in this thread."""

import pytest

from contacts.infrastructure.models import Contact
from tests.factories import UserFactory
from tests.integration.workflows.support import make_workflow, run_due_jobs
from workflows.application.bulk_runs import runs_bulk_move
from workflows.application.runs.operating import Operator, retry_run
from workflows.application.runs.starting import start_run
from workflows.domain.execution import LOOP_CAPPED, MAX_STEP_VISITS, VISITS_ALLOWED_FROM
from workflows.infrastructure.models import ExecutionLog, WorkflowExecution

pytestmark = pytest.mark.django_db(transaction=True)


def tag(key, value):
    return {"key": key, "action_type": "add_tag", "config": {"tag": value}}


def capped_run(account, contact) -> WorkflowExecution:
    """A run the cap fails as it leaves its first step: its path already holds MAX_STEP_VISITS - 1 steps, as
    a long-lived loop would have left it (a loop must wait, so really going round takes days)."""
    workflow = make_workflow(account, [tag("a", "one"), tag("b", "two"), tag("c", "three")])
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    before = MAX_STEP_VISITS - 1
    context = {**run.context, "steps": [{}] * before, "step_keys": ["a"] * before}
    WorkflowExecution.objects.filter(pk=run.pk).update(context=context)
    run_due_jobs()
    run.refresh_from_db()
    assert (run.status, run.last_error_category, run.current_step_key) == ("failed", LOOP_CAPPED, "b")
    return run


def history(run) -> list[tuple]:
    return list(
        ExecutionLog.objects.filter(execution=run).order_by("id").values_list("step_key", "outcome", "decision")
    )


def test_a_retry_of_a_capped_run_goes_on_from_where_it_was_capped(account, contact):
    run = capped_run(account, contact)
    user = UserFactory(username="ada")
    retry_run(execution_id=run.pk, account_id=account.pk, by=Operator(user_id=user.pk, via="admin", name="ada"))
    run.refresh_from_db()
    assert (run.status, run.current_step_key, run.manual_retries) == ("queued", "b", 1)
    assert run.context[VISITS_ALLOWED_FROM] == MAX_STEP_VISITS

    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"  # b and c ran: the allowance is fresh, not one step more
    assert {"one", "two", "three"} <= set(Contact.objects.get(pk=contact.pk).tags)
    (a, lifted, b, c) = history(run)
    assert [a[:2], b[:2], c[:2]] == [("a", "succeeded"), ("b", "succeeded"), ("c", "succeeded")]
    key, outcome, decision = lifted
    assert (key, outcome) == ("b", "skipped")
    assert decision["kind"] == "retry"
    assert decision["by"] == {"user_id": user.pk, "via": "admin", "name": "ada"}
    assert decision["loop_cap_reset"] == {"steps_before": MAX_STEP_VISITS, "allowance": MAX_STEP_VISITS}
    assert decision["at"]
    assert decision["next"] == "b"


def test_a_bulk_retry_lifts_the_cap_too_and_says_who(account, contact):
    run = capped_run(account, contact)
    outcome = runs_bulk_move(
        account_id=account.pk,
        operation="retry",
        status="failed",
        by=Operator(user_id=None, via="api", prefix="rk_test"),
    )
    assert outcome.changed == 1
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    (decision,) = [d for _key, _outcome, d in history(run) if d.get("kind") == "retry"]
    assert decision["by"] == {"user_id": None, "via": "api", "prefix": "rk_test"}


def test_a_retry_of_a_run_that_failed_otherwise_is_as_before(account, contact):
    """No row in its history, nothing lifted: the count goes on from where it was."""
    workflow = make_workflow(account, [tag("a", "one"), {"key": "b", "action_type": "add_tag", "config": {"tag": "x"}}])
    run = start_run(workflow_id=workflow.pk, contact_id=contact.pk).execution
    WorkflowExecution.objects.filter(pk=run.pk).update(status="failed", last_error_category="validation")
    retry_run(execution_id=run.pk, by=Operator(user_id=None, via="admin", name="someone"))
    run.refresh_from_db()
    assert run.status == "queued"
    assert VISITS_ALLOWED_FROM not in run.context
    assert not ExecutionLog.objects.filter(execution=run).exists()


def test_the_api_s_retry_lifts_the_cap_and_the_run_s_logs_say_which_token(account, contact):
    from rest_framework.test import APIClient

    from accounts.application.tokens import api_token_create
    from accounts.infrastructure.models import ApiToken
    from tests.factories import MembershipFactory

    run = capped_run(account, contact)
    user = MembershipFactory(account=account, role="owner").user
    token, secret = api_token_create(user_id=user.pk, account_id=account.pk, name="ops")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    answer = client.post(f"/api/v1/executions/{run.pk}/retry")
    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == "queued"
    run_due_jobs()
    assert client.get(f"/api/v1/executions/{run.pk}").json()["status"] == "completed"
    logs = client.get(f"/api/v1/executions/{run.pk}/logs").json()["results"]
    (lifted,) = [row for row in logs if row["decision"].get("kind") == "retry"]
    prefix = ApiToken.objects.get(pk=token.pk).prefix
    assert lifted["decision"]["by"] == {"user_id": user.pk, "via": "api", "prefix": prefix}
    assert secret not in str(logs)


@pytest.mark.parametrize("how", ["button", "action"])
def test_the_admin_s_retry_lifts_the_cap_and_records_the_user(client, superuser, account, contact, how):
    from django.urls import reverse

    run = capped_run(account, contact)
    client.force_login(superuser)
    if how == "button":
        client.post(reverse("admin:workflows_workflowexecution_operate", args=[run.pk, "retry"]))
    else:
        changelist = reverse("admin:workflows_workflowexecution_changelist")
        client.post(changelist, {"action": "retry_runs", "_selected_action": [run.pk]})
    run_due_jobs()
    run.refresh_from_db()
    assert run.status == "completed"
    (decision,) = [d for _key, _outcome, d in history(run) if d.get("kind") == "retry"]
    assert decision["by"] == {"user_id": superuser.pk, "via": "admin", "name": superuser.get_username()}
