"""Runs over HTTP: starting one, the limit, events, reading runs and their logs, and steering them."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from contacts.models import Event
from jobs.models import Job
from tests.factories import ContactFactory
from tests.integration.api.conftest import assert_problem, error_fields
from tests.integration.workflows.support import WebhookServer, make_workflow, run_due_jobs
from workflows.application.runs import starting
from workflows.application.runs.operating import cancel_run
from workflows.application.workflows import WorkflowService
from workflows.models import ExecutionLog, WorkflowExecution

VALIDATION = "urn:relay:problem:validation-error"
INVALID_STATE = "urn:relay:problem:invalid-state"
TAG_STEP = {"action_type": "add_tag", "config": {"tag": "welcomed"}}
EXECUTIONS = "/api/v1/executions"


def starts(workflow) -> str:
    return f"/api/v1/workflows/{workflow.pk}/executions"


def run_path(run_or_id, action: str = "") -> str:
    run_id = getattr(run_or_id, "pk", run_or_id)
    return f"{EXECUTIONS}/{run_id}" + (f"/{action}" if action else "")


def start_run(workflow, contact, **kwargs) -> WorkflowExecution:
    return starting.start_run(workflow_id=workflow.pk, contact_id=contact.pk, **kwargs).execution


def log(run, index: int, outcome: str = "succeeded", **fields) -> ExecutionLog:
    return ExecutionLog.objects.create(
        execution=run,
        step_index=index,
        step_name=f"step {index}",
        action_type="add_tag",
        attempt_number=1,
        outcome=outcome,
        started_at=timezone.now(),
        duration_ms=3,
        **fields,
    )


# --- Starting a run -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_start_answers_201_with_the_run(owner_api, account, contact):
    workflow = make_workflow(account, [TAG_STEP, TAG_STEP])
    response = owner_api.post(starts(workflow), {"contact": contact.pk, "data": {"order": 7}}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    run = WorkflowExecution.objects.get(pk=body["id"])
    assert response["Location"] == run_path(run)
    assert run.account_id == account.pk
    assert run.trigger_source == "api"
    assert run.created_by_id == owner_api.user.pk
    assert Job.objects.filter(pk=run.next_job_id, handler="workflow_step").exists()
    assert body["workflow"] == workflow.pk
    assert body["workflow_name"] == workflow.name
    assert body["version"] == 1
    assert body["contact"] == contact.pk
    assert body["status"] == "queued"
    assert body["step_count"] == 2
    assert body["trigger_data"] == {"order": 7}
    assert body["last_error"] is None
    assert body["parent"] is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "contact"),
        ({"contact": "seven"}, "contact"),
        ({"contact": 0}, "contact"),
        ({"contact": 1, "data": ["not", "an", "object"]}, "data"),
        ({"contact": 1, "data": {"big": "x" * 70_000}}, "data"),
        ({"contact": 1, "trigger_data": {}}, "trigger_data"),
    ],
)
def test_start_refuses_a_bad_body_naming_the_field(owner_api, account, contact, body, field):
    workflow = make_workflow(account, [TAG_STEP])
    if body.get("contact") == 1:
        body["contact"] = contact.pk
    problem = assert_problem(owner_api.post(starts(workflow), body, format="json"), 400, type_=VALIDATION)
    assert error_fields(problem) == [field]
    assert not WorkflowExecution.objects.exists()


@pytest.mark.django_db
def test_a_foreign_contact_is_refused_exactly_as_a_missing_one(owner_api, account, other_account):
    workflow = make_workflow(account, [TAG_STEP])
    stranger = ContactFactory(account=other_account)
    foreign = owner_api.post(starts(workflow), {"contact": stranger.pk}, format="json")
    absent = owner_api.post(starts(workflow), {"contact": stranger.pk + 1000}, format="json")
    body = assert_problem(foreign, 400, type_=VALIDATION)
    assert error_fields(body) == ["contact"]
    assert foreign.content == absent.content
    assert not WorkflowExecution.objects.exists()


@pytest.mark.django_db
def test_only_an_active_workflow_takes_runs(owner_api, account, contact):
    draft = make_workflow(account, [TAG_STEP], publish=False)
    body = assert_problem(
        owner_api.post(starts(draft), {"contact": contact.pk}, format="json"), 409, type_=INVALID_STATE
    )
    assert body["current_state"] == "draft"
    paused = make_workflow(account, [TAG_STEP])
    WorkflowService().pause(workflow_id=paused.pk)
    body = assert_problem(owner_api.post(starts(paused), {"contact": contact.pk}, format="json"), 409)
    assert body["current_state"] == "paused"
    assert not WorkflowExecution.objects.exists()


@pytest.mark.django_db
def test_the_reenrollment_rule_refuses_with_409(owner_api, account, contact):
    workflow = make_workflow(account, [TAG_STEP], reenrollment="never")
    assert owner_api.post(starts(workflow), {"contact": contact.pk}, format="json").status_code == 201
    body = assert_problem(
        owner_api.post(starts(workflow), {"contact": contact.pk}, format="json"),
        409,
        type_="urn:relay:problem:enrollment-refused",
    )
    assert "never" in body["detail"]
    assert WorkflowExecution.objects.count() == 1


@pytest.mark.django_db
def test_over_the_limit_answers_429_with_retry_after_and_stores_nothing(owner_api, account, contact, settings):
    from idempotency.models import IdempotencyRecord

    settings.API_RUN_LIMIT_RETRY_AFTER = 7
    account.max_concurrent_executions = 1
    account.save(update_fields=["max_concurrent_executions"])
    workflow = make_workflow(account, [TAG_STEP])
    assert owner_api.post(starts(workflow), {"contact": contact.pk}, format="json").status_code == 201
    runs, jobs = WorkflowExecution.objects.count(), Job.objects.count()
    other = ContactFactory(account=account)
    response = owner_api.post(starts(workflow), {"contact": other.pk}, format="json", HTTP_IDEMPOTENCY_KEY="k-429")
    body = assert_problem(response, 429, type_="urn:relay:problem:execution-limit")
    assert response["Retry-After"] == "7"
    assert "limit is 1" in body["detail"]
    assert (WorkflowExecution.objects.count(), Job.objects.count()) == (runs, jobs)
    assert not IdempotencyRecord.objects.exists()
    # Once a run leaves QUEUED/ACTIVE, the same request (same key) goes through.
    WorkflowExecution.objects.update(status="waiting")
    assert (
        owner_api.post(starts(workflow), {"contact": other.pk}, format="json", HTTP_IDEMPOTENCY_KEY="k-429").status_code
        == 201
    )


@pytest.mark.django_db
def test_running_workflows_needs_run_workflows(api_as, account, contact):
    workflow = make_workflow(account, [TAG_STEP])
    run = start_run(workflow, contact)
    viewer = api_as("viewer")
    for response in (
        viewer.post(starts(workflow), {"contact": contact.pk}, format="json"),
        viewer.post("/api/v1/events", {"name": "order.paid", "contact": contact.pk}, format="json"),
        *(viewer.post(run_path(run, action)) for action in ("pause", "resume", "cancel", "retry")),
    ):
        body = assert_problem(response, 403)
        assert "run_workflows" in body["detail"]
    assert viewer.get(starts(workflow)).status_code == 200
    assert viewer.get(EXECUTIONS).status_code == 200
    assert viewer.get(run_path(run)).status_code == 200
    assert viewer.get(run_path(run, "logs")).status_code == 200
    assert WorkflowExecution.objects.get().status == "queued"
    assert api_as("marketer").post(run_path(run, "pause")).status_code == 200


@pytest.mark.django_db
def test_run_endpoints_need_a_token(anonymous, account, contact):
    workflow = make_workflow(account, [TAG_STEP])
    run = start_run(workflow, contact)
    for method, path in [
        ("post", starts(workflow)),
        ("get", starts(workflow)),
        ("post", "/api/v1/events"),
        ("get", EXECUTIONS),
        ("get", run_path(run)),
        ("get", run_path(run, "logs")),
        ("post", run_path(run, "cancel")),
    ]:
        assert_problem(getattr(anonymous, method)(path, {}, format="json"), 401)
    assert WorkflowExecution.objects.get().status == "queued"


# --- Idempotency-Key ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_same_key_and_body_give_the_first_answer_and_one_run(owner_api, account, contact):
    workflow = make_workflow(account, [TAG_STEP])
    body = {"contact": contact.pk, "data": {"order": 7, "lines": [1, 2]}}
    first = owner_api.post(starts(workflow), body, format="json", HTTP_IDEMPOTENCY_KEY="order-7")
    assert first.status_code == 201
    start_run(workflow, ContactFactory(account=account))  # the world moves on between the two calls
    reordered = {"data": {"lines": [1, 2], "order": 7}, "contact": contact.pk}  # same JSON, other key order
    again = owner_api.post(starts(workflow), reordered, format="json", HTTP_IDEMPOTENCY_KEY="order-7")
    assert again.status_code == 201
    assert again.content == first.content
    assert again["Location"] == first["Location"]
    assert again["Idempotent-Replayed"] == "true"
    assert not first.has_header("Idempotent-Replayed")
    assert WorkflowExecution.objects.filter(contact=contact).count() == 1
    assert Job.objects.filter(handler="workflow_step").count() == 2


@pytest.mark.django_db
def test_the_same_key_with_another_request_is_422(owner_api, account, contact):
    workflow = make_workflow(account, [TAG_STEP])
    other_workflow = make_workflow(account, [TAG_STEP])
    owner_api.post(starts(workflow), {"contact": contact.pk}, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    for path, body in [
        (starts(workflow), {"contact": contact.pk, "data": {"x": 1}}),
        (starts(other_workflow), {"contact": contact.pk}),
        ("/api/v1/events", {"name": "order.paid", "contact": contact.pk}),
    ]:
        problem = assert_problem(
            owner_api.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY="k1"),
            422,
            type_="urn:relay:problem:unprocessable",
        )
        assert "Idempotency-Key" in problem["detail"]
    assert WorkflowExecution.objects.count() == 1


@pytest.mark.django_db
def test_keys_belong_to_one_account(api_as, account, other_account, contact):
    mine = make_workflow(account, [TAG_STEP])
    theirs = make_workflow(other_account, [TAG_STEP])
    their_contact = ContactFactory(account=other_account)
    assert (
        api_as("owner").post(starts(mine), {"contact": contact.pk}, format="json", HTTP_IDEMPOTENCY_KEY="k").status_code
        == 201
    )
    them = api_as("owner", in_account=other_account)
    response = them.post(starts(theirs), {"contact": their_contact.pk}, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert response.status_code == 201
    assert not response.has_header("Idempotent-Replayed")
    assert WorkflowExecution.objects.count() == 2


@pytest.mark.django_db
def test_a_refusal_is_not_remembered(owner_api, account, contact):
    workflow = make_workflow(account, [TAG_STEP], publish=False)
    assert (
        owner_api.post(starts(workflow), {"contact": contact.pk}, format="json", HTTP_IDEMPOTENCY_KEY="k").status_code
        == 409
    )
    WorkflowService().publish(workflow_id=workflow.pk)
    response = owner_api.post(starts(workflow), {"contact": contact.pk}, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert response.status_code == 201
    assert not response.has_header("Idempotent-Replayed")


@pytest.mark.django_db
def test_an_expired_key_is_forgotten(owner_api, account, contact):
    from idempotency.models import IdempotencyRecord

    workflow = make_workflow(account, [TAG_STEP], reenrollment="always")
    body = {"contact": contact.pk}
    first = owner_api.post(starts(workflow), body, format="json", HTTP_IDEMPOTENCY_KEY="k")
    IdempotencyRecord.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    second = owner_api.post(starts(workflow), body, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert second.status_code == 201
    assert second.json()["id"] != first.json()["id"]
    assert IdempotencyRecord.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", " ", "k" * 201, "clé"])
def test_a_bad_key_is_a_400_naming_the_header(owner_api, account, contact, key):
    workflow = make_workflow(account, [TAG_STEP])
    response = owner_api.post(starts(workflow), {"contact": contact.pk}, format="json", HTTP_IDEMPOTENCY_KEY=key)
    body = assert_problem(response, 400, type_=VALIDATION)
    assert error_fields(body) == ["Idempotency-Key"]
    assert key not in body["detail"] or not key.strip()
    assert not WorkflowExecution.objects.exists()


@pytest.mark.django_db
def test_creating_a_workflow_honours_the_key_too(owner_api):
    from workflows.models import Workflow

    first = owner_api.post("/api/v1/workflows", {"name": "Once"}, format="json", HTTP_IDEMPOTENCY_KEY="wf-1")
    again = owner_api.post("/api/v1/workflows", {"name": "Once"}, format="json", HTTP_IDEMPOTENCY_KEY="wf-1")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.content == first.content
    assert Workflow.objects.count() == 1


# --- Events ---------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_event_starts_every_matching_workflow_and_says_what_it_skipped(owner_api, account, contact):
    paid = make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "order.paid"})
    vip_only = make_workflow(
        account,
        [TAG_STEP],
        trigger={
            "type": "event",
            "event": "order.paid",
            "filter": [{"field": "tags", "op": "contains", "value": "vip"}],
        },
    )
    make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "order.refunded"})
    response = owner_api.post(
        "/api/v1/events", {"name": "order.paid", "contact": contact.pk, "data": {"total": 42}}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    (started,) = body["started"]
    assert started["workflow"] == paid.pk
    assert started["trigger_source"] == "event"
    assert started["trigger_event"] == "order.paid"
    assert started["trigger_data"] == {"total": 42}
    assert body["skipped"] == [{"workflow": vip_only.pk, "reason": "the contact does not match the trigger's filter"}]
    assert WorkflowExecution.objects.get().workflow_id == paid.pk


@pytest.mark.django_db
def test_an_event_nobody_listens_to_starts_nothing(owner_api, contact):
    response = owner_api.post("/api/v1/events", {"name": "nobody.cares", "contact": contact.pk}, format="json")
    assert response.json() == {"started": [], "skipped": []}


@pytest.mark.django_db
def test_an_event_over_the_limit_is_reported_as_skipped(owner_api, account, contact):
    account.max_concurrent_executions = 0
    account.save(update_fields=["max_concurrent_executions"])
    workflow = make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "order.paid"})
    body = owner_api.post("/api/v1/events", {"name": "order.paid", "contact": contact.pk}, format="json").json()
    assert body["started"] == []
    assert body["skipped"][0]["workflow"] == workflow.pk
    assert "limit" in body["skipped"][0]["reason"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "tag.added", "contact": 1}, "name"),
        ({"name": "contact.deleted", "contact": 1}, "name"),
        ({"name": "email.clicked", "contact": 1}, "name"),
        ({"name": "sms.replied", "contact": 1}, "name"),
        ({"name": "order paid!", "contact": 1}, "name"),
        ({"name": "order.paid"}, "contact"),
        ({"name": "order.paid", "contact": 1, "data": "x"}, "data"),
        ({"name": "order.paid", "contact": 1, "when": "now"}, "when"),
    ],
)
def test_a_bad_event_is_refused_naming_the_field(owner_api, account, contact, body, field):
    make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "tag.added"})
    if body.get("contact") == 1:
        body["contact"] = contact.pk
    problem = assert_problem(owner_api.post("/api/v1/events", body, format="json"), 400, type_=VALIDATION)
    assert error_fields(problem) == [field]
    assert not WorkflowExecution.objects.exists()
    assert not Event.objects.exists()  # nothing stored


@pytest.mark.django_db
def test_a_custom_event_is_stored_on_the_contact_with_its_id_and_time(owner_api, contact):
    owner_api.post("/api/v1/events", {"name": "order.paid", "contact": contact.pk, "data": {"n": 1}}, format="json")
    (event,) = Event.objects.filter(contact=contact)
    assert (event.name, event.data, event.account_id) == ("order.paid", {"n": 1}, contact.account_id)
    assert event.occurred_at is not None


@pytest.mark.django_db
def test_an_event_about_a_foreign_contact_is_refused_exactly_as_a_missing_one(owner_api, account, other_account):
    make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "order.paid"})
    stranger = ContactFactory(account=other_account)
    foreign = owner_api.post("/api/v1/events", {"name": "order.paid", "contact": stranger.pk}, format="json")
    absent = owner_api.post("/api/v1/events", {"name": "order.paid", "contact": stranger.pk + 99}, format="json")
    assert error_fields(assert_problem(foreign, 400)) == ["contact"]
    assert foreign.content == absent.content
    assert not WorkflowExecution.objects.exists()


@pytest.mark.django_db
def test_a_retried_event_starts_its_runs_once(owner_api, account, contact):
    make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "order.paid"}, reenrollment="always")
    body = {"name": "order.paid", "contact": contact.pk}
    first = owner_api.post("/api/v1/events", body, format="json", HTTP_IDEMPOTENCY_KEY="evt-1")
    again = owner_api.post("/api/v1/events", body, format="json", HTTP_IDEMPOTENCY_KEY="evt-1")
    assert again.content == first.content
    assert WorkflowExecution.objects.count() == 1
    owner_api.post("/api/v1/events", body, format="json", HTTP_IDEMPOTENCY_KEY="evt-2")
    assert WorkflowExecution.objects.count() == 2


# --- Reading runs ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_list_is_newest_first_and_scoped(owner_api, account, other_account, contact):
    workflow = make_workflow(account, [TAG_STEP])
    older, newer = start_run(workflow, contact), start_run(workflow, ContactFactory(account=account))
    start_run(make_workflow(other_account, [TAG_STEP]), ContactFactory(account=other_account))
    body = owner_api.get(EXECUTIONS).json()
    assert [r["id"] for r in body["results"]] == [str(newer.pk), str(older.pk)]
    assert "logs" not in body["results"][0]
    paged = owner_api.get(f"{EXECUTIONS}?page_size=1").json()
    assert [r["id"] for r in paged["results"]] == [str(newer.pk)]
    assert [r["id"] for r in owner_api.get(paged["next"]).json()["results"]] == [str(older.pk)]


@pytest.mark.django_db
def test_list_filters(owner_api, account, other_account, contact):
    first, second = make_workflow(account, [TAG_STEP]), make_workflow(account, [TAG_STEP])
    other_contact = ContactFactory(account=account)
    a = start_run(first, contact)
    b = start_run(second, other_contact)
    cancel_run(execution_id=b.pk)
    foreign = make_workflow(other_account, [TAG_STEP])

    def ids(query: str) -> set[str]:
        response = owner_api.get(f"{EXECUTIONS}?{query}")
        assert response.status_code == 200, response.content
        return {r["id"] for r in response.json()["results"]}

    assert ids("status=cancelled") == {str(b.pk)}
    assert ids("status=queued") == {str(a.pk)}
    assert ids(f"workflow={first.pk}") == {str(a.pk)}
    assert ids(f"contact={other_contact.pk}") == {str(b.pk)}
    assert ids(f"workflow={first.pk}&status=cancelled") == set()
    assert ids("created_after=2000-01-01T00:00:00Z") == {str(a.pk), str(b.pk)}
    assert ids("created_before=2000-01-01T00:00:00Z") == set()
    assert ids(f"workflow={foreign.pk}") == set()  # another account's workflow: nothing, as for a missing one
    assert {r["id"] for r in owner_api.get(f"{starts(second)}?status=cancelled").json()["results"]} == {str(b.pk)}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "field"),
    [("status=running", "status"), ("workflow=abc", "workflow"), ("contact=0", "contact"), ("state=queued", "state")],
)
def test_list_refuses_unknown_filter_values_naming_the_allowed_ones(owner_api, query, field):
    body = assert_problem(owner_api.get(f"{EXECUTIONS}?{query}"), 400, type_=VALIDATION)
    assert error_fields(body) == [field]
    if field == "status":
        assert body["errors"][0]["message"].endswith(
            "is not one of: queued, active, paused, waiting, completed, failed, cancelled"
        )


@pytest.mark.django_db
def test_a_run_with_its_logs_bounded_to_the_latest(owner_api, account, contact, settings):
    settings.API_EXECUTION_LOG_LIMIT = 2
    run = start_run(make_workflow(account, [TAG_STEP, TAG_STEP, TAG_STEP]), contact)
    rows = [
        log(run, 0),
        log(run, 1, "retrying", error_category="server_error", error_details="ServerFailure: 503"),
        log(run, 1),
    ]
    body = owner_api.get(run_path(run)).json()
    assert [entry["id"] for entry in body["logs"]] == [rows[1].pk, rows[2].pk]
    assert body["log_count"] == 3
    assert body["logs_truncated"] is True
    retrying = body["logs"][0]
    assert retrying["outcome"] == "retrying"
    assert retrying["error_details"] == "ServerFailure: 503"
    assert body["logs"][1]["error_details"] is None
    page = owner_api.get(f"{run_path(run, 'logs')}?page_size=2").json()
    assert [entry["id"] for entry in page["results"]] == [rows[0].pk, rows[1].pk]  # oldest first, every row
    assert [entry["id"] for entry in owner_api.get(page["next"]).json()["results"]] == [rows[2].pk]
    settings.API_EXECUTION_LOG_LIMIT = 5
    assert owner_api.get(run_path(run)).json()["logs_truncated"] is False


@pytest.mark.django_db
def test_another_accounts_run_is_byte_identical_to_a_missing_one(owner_api, other_account):
    theirs = start_run(make_workflow(other_account, [TAG_STEP]), ContactFactory(account=other_account))
    missing = uuid.uuid4()
    for method, suffix in [
        ("get", ""),
        ("get", "logs"),
        *(("post", a) for a in ("pause", "resume", "cancel", "retry")),
    ]:
        call = getattr(owner_api, method)
        foreign, absent = call(run_path(theirs, suffix)), call(run_path(missing, suffix))
        assert_problem(foreign, 404)
        assert foreign.content == absent.content, suffix
    assert WorkflowExecution.objects.get().status == "queued"
    assert_problem(owner_api.get(f"{EXECUTIONS}/not-a-uuid"), 404)


# --- Steering runs --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_pause_resume_cancel_and_the_409_naming_the_current_state(owner_api, account, contact):
    run = start_run(make_workflow(account, [TAG_STEP]), contact)
    paused = owner_api.post(run_path(run, "pause"))
    assert paused.status_code == 200, paused.content
    assert (paused.json()["status"], paused.json()["paused_from"]) == ("paused", "queued")
    assert Job.objects.get(pk=run.next_job_id).status == "cancelled"
    body = assert_problem(owner_api.post(run_path(run, "pause")), 409, type_=INVALID_STATE)
    assert body["current_state"] == "paused"
    assert "paused" in body["detail"]
    assert owner_api.post(run_path(run, "resume")).json()["status"] == "queued"
    assert owner_api.post(run_path(run, "cancel")).json()["status"] == "cancelled"
    for action in ("pause", "resume", "cancel", "retry"):
        body = assert_problem(owner_api.post(run_path(run, action)), 409, type_=INVALID_STATE)
        assert body["current_state"] == "cancelled"
    run.refresh_from_db()
    assert run.status == "cancelled"


@pytest.fixture
def echo_server():
    server = WebhookServer().start()
    yield server
    server.stop()


@pytest.mark.django_db(transaction=True)
def test_a_failed_webhook_run_shows_no_secret_and_retries(owner_api, account, contact, settings, echo_server):
    """A real webhook step against a real server that echoes the secrets it was sent: none reaches the API."""
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    secret_path, secret_query, secret_header = "PathSecret123456", "QuerySecret98765", "HeaderSecret4567"
    echo_server.answers = [
        (400, {}, f'{{"error": "bad", "you_sent": "{secret_path} {secret_query} Bearer {secret_header}"}}'),
        (200, {}, '{"ok": true}'),
    ]
    workflow = make_workflow(
        account,
        [
            {
                "action_type": "webhook",
                "config": {
                    "url": f"{echo_server.url}/hooks/{secret_path}?token={secret_query}",
                    "headers": {"Authorization": f"Bearer {secret_header}"},
                },
            }
        ],
    )
    response = owner_api.post(starts(workflow), {"contact": contact.pk}, format="json")
    run_id = response.json()["id"]
    run_due_jobs()
    detail = owner_api.get(run_path(run_id))
    body = detail.json()
    assert body["status"] == "failed"
    assert body["last_error_category"] == "validation"
    assert body["logs"][0]["outcome"] == "failed"
    assert body["logs"][0]["response_data"]["status_code"] == 400
    answers = [
        detail,
        owner_api.get(run_path(run_id, "logs")),
        owner_api.get(EXECUTIONS),
        owner_api.get(f"/api/v1/workflows/{workflow.pk}"),
    ]
    for answer in answers:
        text = answer.content.decode()
        for secret in (secret_path, secret_query, secret_header):
            assert secret not in text, (secret, answer.request["PATH_INFO"], text[:2000])

    retried = owner_api.post(run_path(run_id, "retry"))
    assert retried.status_code == 200, retried.content
    assert retried.json()["status"] == "queued"
    run_due_jobs()
    assert owner_api.get(run_path(run_id)).json()["status"] == "completed"
    body = assert_problem(owner_api.post(run_path(run_id, "retry")), 409, type_=INVALID_STATE)
    assert body["current_state"] == "completed"
