"""The workflow endpoints: each success, and each way they refuse."""

import pytest

from tests.integration.api.conftest import assert_problem, error_fields
from tests.integration.workflows.support import make_workflow
from workflows.application.workflows import WorkflowService
from workflows.models import Workflow, WorkflowStep, WorkflowVersion

pytestmark = pytest.mark.django_db

WORKFLOWS = "/api/v1/workflows"
VALIDATION = "urn:relay:problem:validation-error"
INVALID_STATE = "urn:relay:problem:invalid-state"
TAG_STEP = {"action_type": "add_tag", "config": {"tag": "welcomed"}}
EMAIL_STEP = {
    "name": "Hello",
    "action_type": "send_email",
    "config": {"subject": "Hi", "text": "Hello {{ contact.first_name }}"},
}
HOOK_SECRET = "T0SECRETpathtoken"
WEBHOOK_STEP = {
    "name": "Tell the shop",
    "action_type": "webhook",
    "config": {
        "url": f"https://hooks.example.com/services/{HOOK_SECRET}?sig=querysecret",
        "headers": {"Authorization": "Bearer headersecret123", "Content-Type": "application/json"},
        "body": {"api_key": "bodysecret", "order": "{{ trigger.order_id }}", "nested": {"password": "pw-secret"}},
    },
}
SECRETS = (HOOK_SECRET, "querysecret", "headersecret123", "bodysecret", "pw-secret")


def detail(workflow_or_id) -> str:
    return f"{WORKFLOWS}/{getattr(workflow_or_id, 'pk', workflow_or_id)}"


def create(api, **body):
    body.setdefault("name", "Welcome")
    return api.post(WORKFLOWS, body, format="json")


# --- Create ---------------------------------------------------------------------------------------


def test_create_a_draft_with_steps(owner_api, account):
    response = create(
        owner_api,
        name="  Welcome series ",
        description="New sign-ups",
        trigger={"type": "event", "event": "tag.added", "tag": "VIP", "filter": [{"field": "email", "op": "is_set"}]},
        reenrollment="after_finish",
        steps=[EMAIL_STEP, TAG_STEP],
    )
    assert response.status_code == 201, response.content
    body = response.json()
    workflow = Workflow.objects.get(pk=body["id"])
    assert workflow.account_id == account.pk
    assert response["Location"] == detail(workflow)
    assert body["name"] == "Welcome series"
    assert body["status"] == "draft"
    assert body["trigger"] == {
        "type": "event",
        "event": "tag.added",
        "tag": "vip",
        "filter": [{"field": "email", "op": "is_set", "value": None}],
    }
    assert body["reenrollment"] == "after_finish"
    assert body["steps"] == [{"key": "step_1", **EMAIL_STEP}, {"key": "step_2", "name": "", **TAG_STEP}]
    assert body["step_count"] == 2
    assert body["current_version"] is None
    assert body["has_unpublished_changes"] is True
    assert [s.action_type for s in WorkflowStep.objects.filter(workflow=workflow).order_by("position")] == [
        "send_email",
        "add_tag",
    ]


def test_create_with_only_a_name_is_a_manual_draft(owner_api):
    body = create(owner_api).json()
    assert body["trigger"]["type"] == "manual"
    assert body["reenrollment"] == "never"
    assert body["steps"] == []


def test_create_names_every_bad_field_by_its_path_and_stores_nothing(owner_api):
    response = owner_api.post(
        WORKFLOWS,
        {
            "trigger": {"type": "event"},
            "reenrollment": "sometimes",
            "steps": [
                TAG_STEP,
                {"action_type": "send_email", "config": {"subject": "Hi"}},
                {"action_type": "webhook", "config": {"url": "ftp://example.com/x", "colour": "red"}},
                {"action_type": "teleport"},
            ],
        },
        format="json",
    )
    body = assert_problem(response, 400, type_=VALIDATION)
    assert set(error_fields(body)) == {
        "name",
        "trigger.event",
        "reenrollment",
        "steps[1].config.text",
        "steps[2].config.url",
        "steps[2].config.colour",
        "steps[3].action_type",
    }
    messages = {e["field"]: e["message"] for e in body["errors"]}
    assert "http" in messages["steps[2].config.url"]
    assert "steps[2].config.url" in body["detail"]
    assert not Workflow.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "W", "trigger": 5}, "trigger"),
        ({"name": "W", "steps": {"not": "a list"}}, "steps"),
        ({"name": "W", "steps": ["not an object"]}, "steps[0]"),
        ({"name": ["W"]}, "name"),
        ({"name": "W", "reenrollment": ["never"]}, "reenrollment"),
        ({"name": "W", "description": 7}, "description"),
        ({"name": "W", "steps": None}, "steps"),
        ({"name": "W", "status": "active"}, "status"),
        ({"name": "x" * 201}, "name"),
        ({"name": "W", "steps": [{"action_type": "wait", "config": {"duration": "soon"}}]}, "steps[0].config.duration"),
        (
            # a field no contact.updated ever names: refused, as the builder would never offer it
            {
                "name": "W",
                "steps": [
                    {
                        "action_type": "wait_for_event",
                        "config": {"event": "contact.updated", "match": {"field": "plan"}, "timeout": "1d"},
                    }
                ],
            },
            "steps[0].config.match.field",
        ),
        (["not", "an", "object"], ""),
    ],
)
def test_create_refuses_wrong_shapes_naming_the_field(owner_api, body, field):
    problem = assert_problem(owner_api.post(WORKFLOWS, body, format="json"), 400, type_=VALIDATION)
    assert field in error_fields(problem), problem
    assert not Workflow.objects.exists()


def test_only_roles_that_manage_workflows_write_them(api_as, account):
    workflow = make_workflow(account, [TAG_STEP], publish=False)
    viewer = api_as("viewer")
    for response in (
        create(viewer),
        viewer.patch(detail(workflow), {"name": "X"}, format="json"),
        viewer.put(detail(workflow), {}, format="json"),
        viewer.delete(detail(workflow)),
        viewer.post(f"{detail(workflow)}/publish"),
        viewer.post(f"{detail(workflow)}/pause"),
    ):
        body = assert_problem(response, 403)
        assert "manage_workflows" in body["detail"]
    assert viewer.get(WORKFLOWS).status_code == 200
    assert viewer.get(detail(workflow)).status_code == 200
    assert create(api_as("marketer")).status_code == 201
    workflow.refresh_from_db()
    assert workflow.status == "draft"
    assert workflow.name == "Test workflow"


def test_workflow_endpoints_need_a_token(anonymous, account):
    workflow = make_workflow(account, [TAG_STEP])
    for method, path in [
        ("get", WORKFLOWS),
        ("post", WORKFLOWS),
        ("get", detail(workflow)),
        ("patch", detail(workflow)),
        ("put", detail(workflow)),
        ("delete", detail(workflow)),
        ("post", f"{detail(workflow)}/publish"),
        ("post", f"{detail(workflow)}/restore"),
    ]:
        body = assert_problem(getattr(anonymous, method)(path, {}, format="json"), 401)
        assert body["detail"]


# --- Read and list --------------------------------------------------------------------------------


def test_read_shows_steps_trigger_rule_and_the_current_version(owner_api, account):
    workflow = make_workflow(account, [EMAIL_STEP, TAG_STEP], trigger={"type": "api"}, reenrollment="always")
    version = WorkflowVersion.objects.get(workflow=workflow)
    body = owner_api.get(detail(workflow)).json()
    assert body["status"] == "active"
    assert body["trigger"] == {"type": "api", "event": "", "tag": "", "filter": []}
    assert body["reenrollment"] == "always"
    assert [s["action_type"] for s in body["steps"]] == ["send_email", "add_tag"]
    assert body["current_version"] == {
        "id": str(version.pk),
        "number": 1,
        "published_at": body["current_version"]["published_at"],
    }
    assert body["has_unpublished_changes"] is False
    WorkflowService().update(workflow_id=workflow.pk, steps=[TAG_STEP])
    body = owner_api.get(detail(workflow)).json()
    assert body["has_unpublished_changes"] is True
    assert body["current_version"]["number"] == 1


def test_webhook_credentials_are_never_shown(owner_api, account):
    response = create(owner_api, steps=[WEBHOOK_STEP])
    assert response.status_code == 201, response.content
    workflow_id = response.json()["id"]
    for read in (
        response,
        owner_api.get(detail(workflow_id)),
        owner_api.post(f"{detail(workflow_id)}/publish"),
    ):
        text = read.content.decode()
        for secret in SECRETS:
            assert secret not in text, (secret, text)
    config = owner_api.get(detail(workflow_id)).json()["steps"][0]["config"]
    assert config["url"] == "https://hooks.example.com/…"
    assert config["headers"] == {"Authorization": "[redacted]", "Content-Type": "application/json"}
    assert config["body"]["api_key"] == "[redacted]"
    assert config["body"]["nested"] == {"password": "[redacted]"}
    assert config["body"]["order"] == "{{ trigger.order_id }}"  # not a secret: shown


def test_what_was_read_can_be_sent_back_and_hidden_values_are_kept(owner_api, account):
    workflow_id = create(owner_api, steps=[TAG_STEP, WEBHOOK_STEP]).json()["id"]
    read = owner_api.get(detail(workflow_id)).json()
    read["steps"][0]["config"]["tag"] = "greeted"
    read["steps"][1]["config"]["headers"]["X-Extra"] = "plain"
    body = {k: read[k] for k in ("name", "description", "trigger", "reenrollment", "steps")}
    response = owner_api.put(detail(workflow_id), body, format="json")
    assert response.status_code == 200, response.content
    stored = [s.config for s in WorkflowStep.objects.filter(workflow_id=workflow_id).order_by("position")]
    assert stored[0] == {"tag": "greeted"}
    assert stored[1] == {**WEBHOOK_STEP["config"], "headers": {**WEBHOOK_STEP["config"]["headers"], "X-Extra": "plain"}}


def test_a_placeholder_with_nothing_stored_behind_it_is_refused(owner_api, account):
    workflow_id = create(owner_api, steps=[WEBHOOK_STEP]).json()["id"]
    steps = owner_api.get(detail(workflow_id)).json()["steps"]
    moved = [TAG_STEP, steps[0]]  # the webhook is no longer at the position its stored values are
    body = assert_problem(owner_api.patch(detail(workflow_id), {"steps": moved}, format="json"), 400)
    assert set(error_fields(body)) == {  # a set: PostgreSQL's jsonb keeps its own key order
        "steps[1].config.url",
        "steps[1].config.headers.Authorization",
        "steps[1].config.body.api_key",
        "steps[1].config.body.nested.password",
    }
    assert WorkflowStep.objects.get(workflow_id=workflow_id).config == WEBHOOK_STEP["config"]


@pytest.mark.parametrize(
    "url",
    [
        "https://attacker.example/collect",
        "http://hooks.example.com/services/x",  # another scheme
        "https://hooks.example.com:8443/services/x",  # another port
        "https://hooks.example.com.attacker.example/services/x",
        "https://hooks.example.com@attacker.example/services/x",
        "https://hooks.example.com/services/attackers-own-path",  # a shared receiver host: another path, another owner
        "https://HOOKS.example.com:443/v2/{{ trigger.order_id }}",
    ],
)
def test_hidden_secrets_are_not_kept_when_the_url_changes(owner_api, account, url):
    """Otherwise a client who may edit, but never read, the secrets could send them to a host of its own."""
    workflow_id = create(owner_api, steps=[TAG_STEP, WEBHOOK_STEP]).json()["id"]
    steps = owner_api.get(detail(workflow_id)).json()["steps"]
    steps[1]["config"]["url"] = url
    body = assert_problem(owner_api.patch(detail(workflow_id), {"steps": steps}, format="json"), 400)
    errors = {e["field"]: e["message"] for e in body["errors"]}
    assert set(errors) == {
        "steps[1].config.headers.Authorization",
        "steps[1].config.body.api_key",
        "steps[1].config.body.nested.password",
    }
    assert all("re-enter this secret: the URL changed" in m for m in errors.values()), errors
    stored = WorkflowStep.objects.get(workflow_id=workflow_id, position=1).config
    assert stored == WEBHOOK_STEP["config"]


def test_hidden_secrets_are_kept_when_the_url_comes_back_as_shown(owner_api, account):
    workflow_id = create(owner_api, steps=[WEBHOOK_STEP]).json()["id"]
    steps = owner_api.get(detail(workflow_id)).json()["steps"]
    steps[0]["name"] = "Renamed"
    response = owner_api.patch(detail(workflow_id), {"steps": steps}, format="json")
    assert response.status_code == 200, response.content
    stored = WorkflowStep.objects.get(workflow_id=workflow_id).config
    assert stored == WEBHOOK_STEP["config"]


def test_secrets_entered_again_for_a_new_host_are_saved(owner_api, account):
    workflow_id = create(owner_api, steps=[WEBHOOK_STEP]).json()["id"]
    steps = [{**WEBHOOK_STEP, "config": {**WEBHOOK_STEP["config"], "url": "https://new-hooks.example.com/x"}}]
    response = owner_api.patch(detail(workflow_id), {"steps": steps}, format="json")
    assert response.status_code == 200, response.content
    assert WorkflowStep.objects.get(workflow_id=workflow_id).config["url"] == "https://new-hooks.example.com/x"


def test_a_template_that_would_allocate_hundreds_of_megabytes_is_refused_naming_its_field(owner_api, account):
    steps = [TAG_STEP, {"action_type": "send_sms", "config": {"body": '{{ ""|ljust:"300000000" }}'}}]
    body = assert_problem(create(owner_api, steps=steps), 400)
    assert error_fields(body) == ["steps[1].config.body"]
    assert "ljust's width 300000000 is over the limit" in body["errors"][0]["message"]


def test_a_voice_recording_url_is_shown_cut_to_its_host_and_kept_when_sent_back(owner_api, account):
    """A presigned media URL carries its signature in the query: viewers must not read it."""
    recording = "https://media.example.com/calls/hello.mp3?X-Amz-Signature=presignedsecret"
    voice = {"name": "Call", "action_type": "send_voice", "config": {"recording_url": recording}}
    response = create(owner_api, steps=[voice])
    assert response.status_code == 201, response.content
    assert "presignedsecret" not in response.content.decode()
    workflow_id = response.json()["id"]
    steps = owner_api.get(detail(workflow_id)).json()["steps"]
    assert steps[0]["config"]["recording_url"] == "https://media.example.com/…"
    steps[0]["name"] = "Call them"
    assert owner_api.patch(detail(workflow_id), {"steps": steps}, format="json").status_code == 200
    assert WorkflowStep.objects.get(workflow_id=workflow_id).config["recording_url"] == recording
    body = assert_problem(owner_api.patch(detail(workflow_id), {"steps": [TAG_STEP, *steps]}, format="json"), 400)
    assert error_fields(body) == ["steps[1].config.recording_url"]


def test_list_is_newest_first_scoped_and_summarized(owner_api, account, other_account):
    first = make_workflow(account, [TAG_STEP], name="B first")
    second = make_workflow(account, [TAG_STEP, TAG_STEP], publish=False, name="A second")
    make_workflow(other_account, [TAG_STEP])
    body = owner_api.get(WORKFLOWS).json()
    assert [w["id"] for w in body["results"]] == [second.pk, first.pk]
    row = body["results"][0]
    assert "steps" not in row
    assert row["step_count"] == 2
    assert row["current_version"] is None
    assert body["results"][1]["current_version"]["number"] == 1


def test_list_filters(owner_api, account):
    active = make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "order.paid"})
    tagged = make_workflow(account, [TAG_STEP], trigger={"type": "event", "event": "tag.added"}, publish=False)
    manual = make_workflow(account, [TAG_STEP])
    WorkflowService().archive(workflow_id=manual.pk)

    def ids(query: str) -> set[int]:
        response = owner_api.get(f"{WORKFLOWS}?{query}")
        assert response.status_code == 200, response.content
        return {w["id"] for w in response.json()["results"]}

    assert ids("status=active") == {active.pk}
    assert ids("status=archived") == {manual.pk}
    assert ids("trigger_type=event") == {active.pk, tagged.pk}
    assert ids("trigger_event=tag.added") == {tagged.pk}
    assert ids("created_after=2000-01-01T00:00:00Z&trigger_type=manual") == {manual.pk}
    assert ids("created_before=2000-01-01T00:00:00Z") == set()


@pytest.mark.parametrize(
    ("query", "field", "allowed"),
    [
        ("status=running", "status", "draft, active, paused, archived"),
        ("trigger_type=cron", "trigger_type", "manual, api, event"),
        ("stauts=active", "stauts", "status"),
        ("created_after=yesterday", "created_after", "ISO 8601"),
    ],
)
def test_list_refuses_unknown_filter_values_naming_the_allowed_ones(owner_api, query, field, allowed):
    body = assert_problem(owner_api.get(f"{WORKFLOWS}?{query}"), 400, type_=VALIDATION)
    assert error_fields(body) == [field]
    assert allowed in body["errors"][0]["message"]


def test_another_accounts_workflow_is_byte_identical_to_a_missing_one(owner_api, other_account):
    theirs = make_workflow(other_account, [TAG_STEP])
    missing = theirs.pk + 1000
    for method, suffix, body in [
        ("get", "", None),
        ("patch", "", {"name": "Mine now"}),
        ("put", "", {"name": "X", "description": "", "trigger": {}, "reenrollment": "never", "steps": []}),
        ("delete", "", None),
        ("post", "/publish", None),
        ("post", "/pause", None),
        ("post", "/activate", None),
        ("post", "/restore", None),
        ("get", "/executions", None),
        ("post", "/executions", {"contact": 1}),
    ]:
        call = getattr(owner_api, method)
        foreign = call(f"{detail(theirs)}{suffix}", body, format="json")
        absent = call(f"{detail(missing)}{suffix}", body, format="json")
        assert_problem(foreign, 404)
        assert foreign.content == absent.content, (method, suffix)
    theirs.refresh_from_db()
    assert (theirs.name, theirs.status) == ("Test workflow", "active")
    assert_problem(owner_api.get(f"{WORKFLOWS}/1234567890123456789"), 404)  # longer than a bigint: no route


# --- Update ---------------------------------------------------------------------------------------


def test_patch_changes_only_what_is_given(owner_api, account):
    workflow = make_workflow(account, [EMAIL_STEP, TAG_STEP], trigger={"type": "api"}, publish=False)
    response = owner_api.patch(detail(workflow), {"name": "Renamed", "reenrollment": "always"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["name"], body["reenrollment"]) == ("Renamed", "always")
    assert body["trigger"]["type"] == "api"
    assert len(body["steps"]) == 2
    response = owner_api.patch(detail(workflow), {"steps": [TAG_STEP]}, format="json")
    assert response.json()["step_count"] == 1


def test_edits_change_the_draft_not_the_published_version(owner_api, account):
    workflow = make_workflow(account, [EMAIL_STEP])
    owner_api.patch(detail(workflow), {"steps": [TAG_STEP]}, format="json")
    version = WorkflowVersion.objects.get(workflow=workflow)
    assert [s["action_type"] for s in version.steps] == ["send_email"]


def test_patch_names_bad_steps_by_path_and_keeps_the_draft(owner_api, account):
    workflow = make_workflow(account, [TAG_STEP], publish=False)
    body = assert_problem(
        owner_api.patch(
            detail(workflow),
            {"name": "", "steps": [TAG_STEP, {"action_type": "webhook", "config": {"url": "nope"}}]},
            format="json",
        ),
        400,
        type_=VALIDATION,
    )
    assert set(error_fields(body)) == {"name", "steps[1].config.url"}
    workflow.refresh_from_db()
    assert workflow.name == "Test workflow"
    assert WorkflowStep.objects.filter(workflow=workflow).count() == 1


def test_put_requires_every_part(owner_api, account):
    workflow = make_workflow(account, [TAG_STEP], publish=False)
    body = assert_problem(owner_api.put(detail(workflow), {"name": "Only a name"}, format="json"), 400)
    assert set(error_fields(body)) == {"description", "trigger", "reenrollment", "steps"}
    response = owner_api.put(
        detail(workflow),
        {"name": "Whole", "description": "", "trigger": {"type": "api"}, "reenrollment": "never", "steps": []},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["steps"] == []
    assert response.json()["trigger"]["type"] == "api"


def test_an_archived_workflow_cannot_be_edited(owner_api, account):
    workflow = make_workflow(account, [TAG_STEP])
    WorkflowService().archive(workflow_id=workflow.pk)
    body = assert_problem(owner_api.patch(detail(workflow), {"name": "X"}, format="json"), 409, type_=INVALID_STATE)
    assert body["current_state"] == "archived"


# --- Delete (archive), publish, pause, activate, restore ------------------------------------------


def test_delete_archives_and_is_idempotent(owner_api, account):
    workflow = make_workflow(account, [TAG_STEP])
    for _ in range(2):
        response = owner_api.delete(detail(workflow))
        assert response.status_code == 200, response.content
        assert response.json()["status"] == "archived"
    assert Workflow.objects.filter(pk=workflow.pk).exists()
    assert owner_api.get(detail(workflow)).json()["status"] == "archived"


def test_publish_returns_the_new_version_and_only_makes_one_when_the_draft_changed(owner_api, account):
    workflow = make_workflow(account, [TAG_STEP], publish=False)
    response = owner_api.post(f"{detail(workflow)}/publish")
    assert response.status_code == 201, response.content
    version = response.json()
    assert version["number"] == 1
    assert version["workflow"] == workflow.pk
    assert version["steps"] == [{"key": "step_1", "name": "", **TAG_STEP}]
    assert set(version) == {"id", "number", "workflow", "trigger", "reenrollment", "steps", "goals", "published_at"}
    workflow.refresh_from_db()
    assert workflow.status == "active"
    assert str(workflow.current_version_id) == version["id"]

    again = owner_api.post(f"{detail(workflow)}/publish")
    assert again.status_code == 200
    assert again.json()["id"] == version["id"]

    owner_api.patch(detail(workflow), {"steps": [TAG_STEP, EMAIL_STEP]}, format="json")
    newer = owner_api.post(f"{detail(workflow)}/publish")
    assert newer.status_code == 201
    assert newer.json()["number"] == 2


def test_publish_refuses_a_draft_without_steps_and_an_archived_workflow(owner_api, account):
    empty = make_workflow(account, [], publish=False)
    body = assert_problem(owner_api.post(f"{detail(empty)}/publish"), 400, type_=VALIDATION)
    assert error_fields(body) == ["steps"]
    archived = make_workflow(account, [TAG_STEP])
    WorkflowService().archive(workflow_id=archived.pk)
    body = assert_problem(owner_api.post(f"{detail(archived)}/publish"), 409, type_=INVALID_STATE)
    assert body["current_state"] == "archived"
    assert WorkflowVersion.objects.filter(workflow=empty).count() == 0


def test_pause_activate_and_restore(owner_api, account):
    workflow = make_workflow(account, [TAG_STEP])
    assert owner_api.post(f"{detail(workflow)}/pause").json()["status"] == "paused"
    body = assert_problem(owner_api.post(f"{detail(workflow)}/pause"), 409, type_=INVALID_STATE)
    assert body["current_state"] == "paused"
    assert owner_api.post(f"{detail(workflow)}/activate").json()["status"] == "active"
    body = assert_problem(owner_api.post(f"{detail(workflow)}/restore"), 409, type_=INVALID_STATE)
    assert body["current_state"] == "active"
    owner_api.delete(detail(workflow))
    assert owner_api.post(f"{detail(workflow)}/restore").json()["status"] == "draft"
    never_published = make_workflow(account, [TAG_STEP], publish=False)
    body = assert_problem(owner_api.post(f"{detail(never_published)}/activate"), 409, type_=INVALID_STATE)
    assert body["current_state"] == "draft"


@pytest.mark.django_db
def test_goals_and_the_tracking_switch_round_trip_and_are_frozen_at_publish(owner_api):
    goal = {"name": "Bought", "conditions": [{"field": "tags", "op": "contains", "value": "customer"}]}
    body = {"name": "Nurture", "steps": [TAG_STEP], "goals": [goal], "track_email_engagement": False}
    created = owner_api.post(WORKFLOWS, body, format="json")
    assert created.status_code == 201, created.content
    shown = created.json()
    assert shown["goals"] == [{**goal, "then": "$end"}]
    assert shown["track_email_engagement"] is False
    workflow_id = shown["id"]
    version = owner_api.post(f"{WORKFLOWS}/{workflow_id}/publish", format="json").json()
    assert version["goals"] == [{**goal, "then": "$end"}]
    changed = owner_api.patch(f"{WORKFLOWS}/{workflow_id}", {"goals": []}, format="json").json()
    assert changed["goals"] == []
    assert changed["track_email_engagement"] is False  # not given: unchanged
    assert changed["has_unpublished_changes"] is True


@pytest.mark.django_db
def test_a_goal_with_an_unknown_field_is_refused_naming_its_path_and_nothing_is_stored(owner_api):
    goal = {"name": "Bought", "conditions": [{"field": "purchases", "op": "equals", "value": 1}]}
    response = owner_api.post(WORKFLOWS, {"name": "Nurture", "steps": [TAG_STEP], "goals": [goal]}, format="json")
    problem = assert_problem(response, 400, type_=VALIDATION)
    assert error_fields(problem) == ["goals[0].conditions[0].field"]
    assert not Workflow.objects.exists()


@pytest.mark.django_db
def test_null_tracking_means_the_accounts_setting_on_create_put_and_patch(owner_api):
    """The schema says `track_email_engagement: null` is "the account's setting"; the API takes it so."""
    created = owner_api.post(WORKFLOWS, {"name": "N", "track_email_engagement": None}, format="json")
    assert created.status_code == 201, created.content
    workflow_id = created.json()["id"]
    assert created.json()["track_email_engagement"] is None
    assert Workflow.objects.get(pk=workflow_id).track_email_engagement is None
    url = f"{WORKFLOWS}/{workflow_id}"
    assert owner_api.patch(url, {"track_email_engagement": True}, format="json").json()["track_email_engagement"]
    patched = owner_api.patch(url, {"track_email_engagement": None}, format="json")
    assert patched.status_code == 200, patched.content
    assert Workflow.objects.get(pk=workflow_id).track_email_engagement is None
    whole = {"name": "N", "description": "", "trigger": {}, "reenrollment": "never", "steps": []}
    replaced = owner_api.put(url, {**whole, "track_email_engagement": None}, format="json")
    assert replaced.status_code == 200, replaced.content
    assert replaced.json()["track_email_engagement"] is None
    refused = owner_api.patch(url, {"track_email_engagement": "yes"}, format="json")
    assert error_fields(assert_problem(refused, 400)) == ["track_email_engagement"]
