"""The builder's forms as a browser posts them (no JSON): each action's fields become its config, errors land
next to their fields for every step at once, swaps always work, preview and test sends, version diffs."""

import pytest
from django.urls import reverse

from contacts.application.services import contact_create
from tests.factories import MembershipFactory, UserFactory
from tests.integration.integrations.servers import SmtpServer
from tests.integration.workflows.support import make_workflow
from workflows.admin_roles import grant_role
from workflows.application.workflows import WorkflowService
from workflows.infrastructure.models import Workflow, WorkflowExecution, WorkflowStep

pytestmark = pytest.mark.django_db


@pytest.fixture
def marketer(client, account):
    user = UserFactory()
    MembershipFactory(account=account, user=user, role="marketer")
    grant_role(user, "marketer")
    client.force_login(user)
    return client


def page_data(account, steps, *, existing=(), trigger_event="tag.added", tag="vip", **extra):
    """What the add/change page posts: the workflow's fields and each step card's own fields."""
    data = {
        "account": account.pk,
        "name": "Welcome",
        "description": "",
        "trigger_type": "event",
        "trigger_event": trigger_event,
        "trigger_custom_event": "",
        "trigger_tag": tag,
        "reenrollment": "never",
        "steps-TOTAL_FORMS": len(steps),
        "steps-INITIAL_FORMS": len(existing),
        "steps-MIN_NUM_FORMS": 0,
        "steps-MAX_NUM_FORMS": 1000,
        "versions-TOTAL_FORMS": 0,
        "versions-INITIAL_FORMS": 0,
        "versions-MIN_NUM_FORMS": 0,
        "versions-MAX_NUM_FORMS": 1000,
        **extra,
    }
    for index, (action_type, fields) in enumerate(steps):
        prefix = f"steps-{index}"
        data.update({f"{prefix}-position": index, f"{prefix}-name": "", f"{prefix}-action_type": action_type})
        data[f"{prefix}-config_mode"] = "form"
        for name, value in fields.items():
            data[f"{prefix}-{action_type}-{name}"] = value
        if index < len(existing):
            data[f"{prefix}-id"] = existing[index].pk
            data[f"{prefix}-workflow"] = existing[index].workflow_id
    return data


EVERY_ACTION = [
    ("send_email", {"subject": "Hi {{ contact.first_name }}", "text": "Hello", "html": "", "max_attempts": "5"}),
    ("send_sms", {"body": "Hi {{ contact.first_name }}"}),
    ("send_voice", {"mode": "message", "message": "Hello", "recording_url": ""}),
    (
        "webhook",
        {
            "method": "POST",
            "url": "https://hooks.example.com/relay",
            "headers-key": ["Authorization", ""],
            "headers-value": ["Bearer abc", ""],
            "body": '{"email": "{{ contact.email }}"}',
            "base_delay": "30",
        },
    ),
    ("wait", {"mode": "duration", "amount": "3", "unit": "days"}),
    ("wait", {"mode": "until", "until_date": "2027-01-15", "until_time": "09:30"}),
    (
        "update_contact",
        {
            "contact_fields-key": ["last_name", ""],
            "contact_fields-value": ["Lovelace", ""],
            "custom_field_values-key": ["plan"],
            "custom_field_values-value": ["pro"],
        },
    ),
    ("add_tag", {"tag": "Engaged"}),
    ("remove_tag", {"tag": "trial"}),
    ("wait", {"mode": "until", "until_date": "2027-01-15", "until_time": "09:30", "clock": "contact"}),
    ("wait", {"mode": "time_of_day", "at_time": "09:00", "clock": "contact"}),
    ("wait", {"mode": "time_of_day", "at_time": "18:45", "clock": "account"}),
]


def test_every_action_is_built_from_its_fields(marketer, account):
    account.time_zone = "Europe/Paris"
    account.save()
    response = marketer.post(reverse("admin:workflows_workflow_add"), page_data(account, EVERY_ACTION))
    assert response.status_code == 302, response.content.decode()[:2000]
    configs = [s.config for s in Workflow.objects.get().steps.order_by("position")]
    assert configs == [
        {"subject": "Hi {{ contact.first_name }}", "text": "Hello", "max_attempts": 5},
        {"body": "Hi {{ contact.first_name }}"},
        {"message": "Hello"},
        {
            "method": "POST",
            "url": "https://hooks.example.com/relay",
            "headers": {"Authorization": "Bearer abc"},
            "body": {"email": "{{ contact.email }}"},
            "base_delay": 30,
        },
        {"duration": "3d"},
        {"until": "2027-01-15T09:30:00+01:00"},  # the account's time zone
        {"fields": {"last_name": "Lovelace"}, "custom_fields": {"plan": "pro"}},
        {"tag": "Engaged"},
        {"tag": "trial"},
        {"until": "2027-01-15T09:30:00", "time_zone": "contact"},  # 09:30 on each contact's clock
        {"time_of_day": "09:00", "time_zone": "contact"},
        {"time_of_day": "18:45", "time_zone": "account"},
    ]


def test_the_change_page_shows_each_step_in_its_form_and_round_trips(marketer, account):
    response = marketer.post(reverse("admin:workflows_workflow_add"), page_data(account, EVERY_ACTION))
    workflow = Workflow.objects.get()
    before = [s.config for s in workflow.steps.order_by("position")]
    page = marketer.get(reverse("admin:workflows_workflow_change", args=[workflow.pk]))
    formset = page.context["inline_admin_formsets"][0].formset
    assert not any(form.in_json_mode for form in formset.forms)  # every config fits its form
    assert formset.forms[5].config_forms["wait"].initial["until_time"].strftime("%H:%M") == "09:30"
    assert formset.forms[9].config_forms["wait"].initial["clock"] == "contact"
    assert formset.forms[10].config_forms["wait"].initial["at_time"].strftime("%H:%M") == "09:00"
    # Post the page back as the browser would (the forms' initial values) and nothing changes.
    data = page_data(account, EVERY_ACTION, existing=list(workflow.steps.order_by("position")))
    response = marketer.post(reverse("admin:workflows_workflow_change", args=[workflow.pk]), data)
    assert response.status_code == 302
    assert [s.config for s in workflow.steps.order_by("position")] == before


def test_a_webhook_step_marks_names_secret_and_the_page_gives_them_back(marketer, account):
    fields = {"method": "POST", "url": "https://hooks.example.com/relay", "body": "", "secrets": "X-Tenant, ref"}
    response = marketer.post(reverse("admin:workflows_workflow_add"), page_data(account, [("webhook", fields)]))
    assert response.status_code == 302, response.content.decode()[:2000]
    workflow = Workflow.objects.get()
    assert workflow.steps.get().config["secrets"] == ["X-Tenant", "ref"]
    page = marketer.get(reverse("admin:workflows_workflow_change", args=[workflow.pk]))
    form = page.context["inline_admin_formsets"][0].formset.forms[0]
    assert not form.in_json_mode
    assert form.config_forms["webhook"].initial["secrets"] == "X-Tenant, ref"
    bad = {**fields, "secrets": "X Tenant"}
    response = marketer.post(reverse("admin:workflows_workflow_add"), page_data(account, [("webhook", bad)]))
    errors = response.context["inline_admin_formsets"][0].formset.forms[0].config_forms["webhook"].errors
    assert "no spaces" in errors["secrets"][0]


def test_errors_of_every_step_show_at_once_next_to_their_fields(marketer, account):
    steps = [
        ("send_email", {"subject": "Hi {{ contact.frist_name }}", "text": ""}),
        ("webhook", {"method": "POST", "url": "http://127.0.0.1:9/hook", "body": "{not json"}),
        ("webhook", {"method": "POST", "url": "http://127.0.0.1:9/hook", "body": ""}),
        ("wait", {"mode": "duration", "amount": ""}),
        ("add_tag", {"tag": ""}),
    ]
    response = marketer.post(reverse("admin:workflows_workflow_add"), page_data(account, steps))
    assert response.status_code == 200
    forms = response.context["inline_admin_formsets"][0].formset.forms
    email = forms[0].config_forms["send_email"].errors
    assert "Did you mean {{ contact.first_name }}?" in email["subject"][0]
    assert email["text"] == ["Is required"]
    assert "This is not valid JSON" in forms[1].config_forms["webhook"].errors["body"][0]
    guard = forms[2].config_forms["webhook"].errors["url"][0]
    assert "loopback" in guard
    assert "WEBHOOK_ALLOWED_HOSTS" in guard
    assert forms[3].config_forms["wait"].errors["amount"] == ["Say how long to wait, e.g. 3 days."]
    assert forms[4].config_forms["add_tag"].errors["tag"] == ["Is required"]
    assert not Workflow.objects.exists()


def test_an_unknown_custom_event_must_be_declared(marketer, account):
    steps = [("add_tag", {"tag": "x"})]
    declared = page_data(account, steps, trigger_event="__other__", tag="", trigger_custom_event="order.placed")
    assert marketer.post(reverse("admin:workflows_workflow_add"), declared).status_code == 302
    workflow = Workflow.objects.get()
    assert workflow.trigger_event == "order.placed"
    page = marketer.get(reverse("admin:workflows_workflow_add")).content.decode()
    assert "order.placed (custom event)" in page  # now a known event of the account
    empty = page_data(account, steps, trigger_event="__other__", tag="", trigger_custom_event="")
    response = marketer.post(reverse("admin:workflows_workflow_add"), empty)
    assert response.context["adminform"].form.errors["trigger_custom_event"]


def test_swapping_two_steps_always_works(marketer, account):
    workflow = make_workflow(
        account,
        [{"action_type": "add_tag", "config": {"tag": "one"}}, {"action_type": "add_tag", "config": {"tag": "two"}}],
        publish=False,
    )
    existing = list(workflow.steps.order_by("position"))
    data = page_data(account, [("add_tag", {"tag": "one"}), ("add_tag", {"tag": "two"})], existing=existing)
    data["steps-0-position"], data["steps-1-position"] = 1, 0  # what ↑ / ↓ or a drag leaves in the page
    response = marketer.post(reverse("admin:workflows_workflow_change", args=[workflow.pk]), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert [s.config["tag"] for s in WorkflowStep.objects.filter(workflow=workflow).order_by("position")] == [
        "two",
        "one",
    ]


def test_the_page_says_when_the_draft_differs_from_what_runs(marketer, account):
    workflow = make_workflow(account, [{"action_type": "add_tag", "config": {"tag": "one"}}])
    url = reverse("admin:workflows_workflow_change", args=[workflow.pk])
    assert "runs use v1" in marketer.get(url).content.decode()
    WorkflowService().update(workflow_id=workflow.pk, steps=[{"action_type": "add_tag", "config": {"tag": "two"}}])
    assert "Unpublished changes:</strong> runs still use v1" in marketer.get(url).content.decode()
    WorkflowService().publish(workflow_id=workflow.pk)
    history = marketer.get(reverse("admin:workflows_workflow_versions", args=[workflow.pk]) + "?a=1&b=2")
    changes = [(c.where, c.what, c.before, c.after) for c in history.context["changes"]]
    assert changes == [("Step step_1 (add_tag)", "tag", "one", "two")]


def _step_post(account, prefix, action_type, fields, **extra):
    data = {"account": account.pk, "step_prefix": prefix, f"{prefix}-action_type": action_type, **extra}
    data[f"{prefix}-config_mode"] = "form"
    data.update({f"{prefix}-{action_type}-{k}": v for k, v in fields.items()})
    return data


def test_preview_renders_the_email_for_a_contact_sanitised(marketer, account):
    ada = contact_create(account_id=account.pk, email="ada@example.com", first_name="Ada", phone="")
    fields = {"subject": "Hi {{ contact.first_name }}", "text": "T", "html": '<p onclick="x()">Hi <script>a</script>'}
    data = _step_post(account, "steps-0", "send_email", fields, contact="ada@example.com")
    response = marketer.post(reverse("admin:workflows_workflow_preview"), data)
    preview = response.json()["preview"]
    assert preview["subject"] == "Hi Ada"
    assert preview["contact_label"] == ada.email
    assert "onclick" not in preview["html"]
    assert "<script" not in preview["html"]


HOSTILE_NAME = "<img src=x onerror=alert(7)>"


@pytest.mark.parametrize("role", ["marketer", "viewer"])
def test_a_hostile_name_previews_as_text_for_whoever_previews(client, account, role):
    """The newest contact (no contact typed) named `<img src=x onerror=...>`: the preview is data (JSON), every
    text part the characters the contact typed, and the HTML part sanitised, its copy of the name escaped."""
    user = UserFactory()
    MembershipFactory(account=account, user=user, role=role)
    grant_role(user, role)
    client.force_login(user)
    contact_create(account_id=account.pk, email="ada@example.com", first_name="Ada", phone="")
    contact_create(account_id=account.pk, email="eve@example.com", first_name=HOSTILE_NAME, phone="")
    fields = {
        "subject": "Hi {{ contact.first_name }}",
        "text": "Hi {{ contact.first_name }}",
        "html": "<p>Hi {{ contact.first_name }}</p>"
        "<p>{% autoescape off %}{{ contact.first_name }}{% endautoescape %}</p>",
    }
    response = client.post(
        reverse("admin:workflows_workflow_preview"), _step_post(account, "steps-0", "send_email", fields)
    )
    assert response["Content-Type"] == "application/json"
    answer = response.json()
    assert answer["problems"] == []
    preview = answer["preview"]
    assert preview["contact_label"] == "eve@example.com"
    assert preview["text"] == preview["subject"] == f"Hi {HOSTILE_NAME}"
    assert "<p>Hi &lt;img src=x onerror=alert(7)&gt;</p>" in preview["html"]
    assert "onerror" not in preview["html"].replace("&lt;img src=x onerror=alert(7)&gt;", "")  # the raw copy: cleaned
    sms = {"body": "Hi {{ contact.first_name }}"}
    answer = client.post(reverse("admin:workflows_workflow_preview"), _step_post(account, "steps-0", "send_sms", sms))
    assert answer.json()["preview"]["sms"] == f"Hi {HOSTILE_NAME}"


def test_send_a_test_goes_through_the_real_channel_and_starts_no_run(marketer, account, settings):
    contact_create(account_id=account.pk, email="ada@example.com", first_name="Ada", phone="")
    server = SmtpServer().start()
    try:
        settings.MAILERS = server.mailers_setting()
        data = _step_post(account, "steps-0", "send_email", {"subject": "Hi {{ contact.first_name }}", "text": "T"})
        data.update(contact="ada@example.com", to="me@example.com")
        response = marketer.post(reverse("admin:workflows_workflow_send_test"), data)
        assert response.json()["ok"] is True, response.json()
        (_, recipients, _) = server.messages[0]
        assert recipients == ["me@example.com"]
        assert server.parsed()["Subject"] == "[Test] Hi Ada"
        bad = marketer.post(reverse("admin:workflows_workflow_send_test"), {**data, "to": "nobody"})
        assert bad.status_code == 400
        assert "email address" in bad.json()["message"]
    finally:
        server.stop()
    assert not WorkflowExecution.objects.exists()


def test_a_custom_field_no_contact_has_is_a_warning_on_its_step(marketer, account):
    contact_create(
        account_id=account.pk, email="ada@example.com", first_name="Ada", phone="", custom_fields={"plan": "pro"}
    )
    steps = [("send_sms", {"body": "Your {{ contact.custom_fields.plna }} plan"})]
    response = marketer.post(reverse("admin:workflows_workflow_add"), page_data(account, steps, _continue="1"))
    assert response.status_code == 302  # saved: a contact may get the field later
    page = marketer.get(response["Location"]).content.decode()
    assert "No contact has the custom field &#x27;plna&#x27; yet" in page
    assert "custom fields in use: plan" in page


def test_the_templates_variables_leave_out_what_the_template_binds():
    from workflows.infrastructure.templates import renderer

    source = (
        "{% for t in contact.tags %}{{ t }}{{ forloop.counter }}{% endfor %}{% with n=trigger.n %}{{ n }}{% endwith %}"
    )
    assert renderer.variables(source) == [("contact", "tags"), ("trigger", "n")]
    assert renderer.variables("{% if custom.plan == 'pro' %}{{ contact.first_name|default:run.id }}{% endif %}") == [
        ("custom", "plan"),
        ("contact", "first_name"),
        ("run", "id"),
    ]


def test_the_tracking_switch_is_a_choice_on_the_form_and_saved_through_the_service(marketer, account):
    steps = [("add_tag", {"tag": "Engaged"})]
    response = marketer.post(
        reverse("admin:workflows_workflow_add"), page_data(account, steps, track_email_engagement="false")
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    workflow = Workflow.objects.get()
    assert workflow.track_email_engagement is False
    page = marketer.get(reverse("admin:workflows_workflow_change", args=[workflow.pk]))
    assert page.context["adminform"].form["track_email_engagement"].value() == "false"
    # Back to "as the account is set".
    data = page_data(account, steps, existing=list(workflow.steps.all()), track_email_engagement="")
    response = marketer.post(reverse("admin:workflows_workflow_change", args=[workflow.pk]), data)
    assert response.status_code == 302
    workflow.refresh_from_db()
    assert workflow.track_email_engagement is None
