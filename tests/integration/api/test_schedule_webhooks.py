"""deliver_webhook scheduled hooks: the URL goes through the webhook steps' SSRF guard when the hook is saved,
and each tick's record says how its delivery really ended (succeeded, refused, failed), through a real local
HTTP receiver and a real in-process worker (so the queue's retries and dead-letter hook run as in production).
"""

import pytest

from jobs.application.schedules import fire_due_schedules
from jobs.application.worker import Worker
from jobs.models import Job, Schedule
from tests.integration.api.conftest import assert_problem, error_fields
from tests.integration.api.test_schedules import make_due
from tests.integration.integrations.servers import HttpSink
from tests.integration.workflows.support import run_due_jobs
from workflows.models import ScheduledHook

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def every_minute_allowed(settings):
    """These tests tick every minute; the limit on how often a hook may fire has tests of its own."""
    settings.SCHEDULED_HOOK_MIN_INTERVAL_MINUTES = 0


@pytest.fixture
def receiver():
    sink = HttpSink().start()
    yield sink
    sink.stop()


@pytest.fixture
def guard_active(settings):
    """The SSRF guard as in production: nothing on loopback or a private network is let through."""
    settings.WEBHOOK_ALLOWED_HOSTS = []
    return settings


@pytest.fixture
def receiver_allowed(settings, receiver):
    """Only the local receiver's exact host:port let through the guard (what tests may do, and nothing more)."""
    settings.WEBHOOK_ALLOWED_HOSTS = [f"127.0.0.1:{receiver.port}"]
    settings.WEBHOOK_CONNECT_TIMEOUT = 2.0
    settings.WEBHOOK_READ_TIMEOUT = 2.0
    settings.JOB_POLL_INTERVAL = 0.05
    return settings


def webhook_hook(url: str, **action) -> dict:
    return {"name": "ping", "cron": "* * * * *", "action": {"type": "deliver_webhook", "url": url, **action}}


def run_worker() -> None:
    """Every job due now, through the real worker (retries, failures and dead-letter hooks as in production)."""
    Worker(burst=True, concurrency=1, install_signal_handlers=False).run()


def tick(owner_api, hook_id: int) -> dict:
    """Fire the hook's tick, let the worker run what it queued, and return the tick as the API shows it."""
    make_due(hook_id)
    assert fire_due_schedules() == 1
    run_worker()
    (shown,) = owner_api.get(f"/api/v1/schedules/{hook_id}/runs").json()["results"]
    return shown


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.1/hook", "127.1 is a loopback address"),
        ("http://169.254.169.254/latest/meta-data", "cloud metadata address"),
        ("http://localhost:8080/hook", "localhost resolves to 127.0.0.1"),  # a name resolving to loopback
        ("http://10.0.0.7/hook", "private address"),
        ("http://[::1]/hook", "loopback"),
    ],
)
def test_a_webhook_url_the_guard_refuses_is_a_400_naming_action_url_as_a_step_is_refused(
    guard_active, owner_api, url, why
):
    body = assert_problem(owner_api.post("/api/v1/schedules", webhook_hook(url), format="json"), 400)
    assert error_fields(body) == ["action.url"]
    message = body["errors"][0]["message"]
    assert why in message
    assert "WEBHOOK_ALLOWED_HOSTS" in message
    assert not ScheduledHook.objects.exists()
    assert not Schedule.objects.filter(name__startswith="hook:").exists()

    # One guard: a webhook step with the same URL is refused with the same words.
    step = {"action_type": "webhook", "config": {"url": url}}
    refused = assert_problem(
        owner_api.post("/api/v1/workflows", {"name": "w", "steps": [step]}, format="json"),
        400,
    )
    step_messages = {e["field"]: e["message"] for e in refused["errors"]}
    assert step_messages["steps[0].config.url"] == message


def test_headers_are_checked_at_save_as_a_steps_are(guard_active, owner_api):
    body = assert_problem(
        owner_api.post(
            "/api/v1/schedules",
            webhook_hook("https://hooks.example.com/x", headers={"Host": "internal", "X-Ok": "yes", "Bad Name": "1"}),
            format="json",
        ),
        400,
    )
    assert sorted(error_fields(body)) == ["action.headers.Bad Name", "action.headers.Host"]


def test_a_delivered_tick_is_recorded_as_succeeded_with_the_status_code(receiver_allowed, receiver, owner_api):
    hook = owner_api.post("/api/v1/schedules", webhook_hook(receiver.url("/ok")), format="json")
    assert hook.status_code == 201, hook.content
    shown = tick(owner_api, hook.json()["id"])
    assert (shown["status"], shown["error"], shown["detail"]["status_code"]) == ("succeeded", None, 200)
    assert len(receiver.requests_to("/ok")) == 1
    assert receiver.requests_to("/ok")[0].header("webhook-id") == shown["detail"]["webhook_id"]


def test_a_delivery_the_guard_refuses_when_it_runs_is_recorded_as_refused_not_succeeded(
    receiver_allowed, receiver, owner_api
):
    hook = owner_api.post("/api/v1/schedules", webhook_hook(receiver.url("/ok")), format="json").json()
    receiver_allowed.WEBHOOK_ALLOWED_HOSTS = []  # the operator took the host off the allow-list since
    shown = tick(owner_api, hook["id"])
    assert shown["status"] == "refused"
    assert "webhook target refused: 127.0.0.1 is a loopback address" in shown["error"]
    assert receiver.requests == []  # nothing was sent
    assert Job.objects.get(pk=shown["detail"]["webhook_job"]).status == "failed"


def test_a_delivery_the_receiver_refuses_is_recorded_as_failed(receiver_allowed, receiver, owner_api):
    hook = owner_api.post("/api/v1/schedules", webhook_hook(receiver.url("/status/404")), format="json").json()
    shown = tick(owner_api, hook["id"])
    assert shown["status"] == "failed"
    assert "404" in shown["error"]
    assert len(receiver.requests_to("/status/404")) == 1  # a 404 is not retried


def test_a_delivery_is_retried_as_delivering_and_recorded_as_failed_when_the_retries_run_out(
    receiver_allowed, receiver, owner_api
):
    receiver_allowed.JOB_MAX_RETRIES = 2
    receiver_allowed.JOB_RETRY_DELAY_SECONDS = 0.01
    receiver_allowed.JOB_BACKOFF_MAX_SECONDS = 0.01
    hook = owner_api.post("/api/v1/schedules", webhook_hook(receiver.url("/status/503")), format="json").json()
    make_due(hook["id"])
    assert fire_due_schedules() == 1
    Worker(burst=True, concurrency=1, install_signal_handlers=False).run()
    (shown,) = owner_api.get(f"/api/v1/schedules/{hook['id']}/runs").json()["results"]
    job = Job.objects.get(pk=shown["detail"]["webhook_job"])
    while job.status == "retrying":  # retries come due a moment later: run them as a worker would
        run_worker()
        job.refresh_from_db()
    (shown,) = owner_api.get(f"/api/v1/schedules/{hook['id']}/runs").json()["results"]
    assert (job.status, shown["status"]) == ("dead", "failed")
    assert "503" in shown["error"]
    assert len(receiver.requests_to("/status/503")) == 3


def test_a_flaky_receiver_is_delivering_between_attempts_then_succeeded(receiver_allowed, receiver, owner_api):
    receiver_allowed.JOB_RETRY_DELAY_SECONDS = 0.01
    receiver_allowed.JOB_BACKOFF_MAX_SECONDS = 0.01
    hook = owner_api.post("/api/v1/schedules", webhook_hook(receiver.url("/flaky/1/a")), format="json").json()
    make_due(hook["id"])
    assert fire_due_schedules() == 1
    run_due_jobs(handler="scheduled_hook")
    with pytest.raises(Exception, match="503"):
        run_due_jobs(handler="scheduled_hook.deliver")  # the first attempt fails; the queue would retry it
    (shown,) = owner_api.get(f"/api/v1/schedules/{hook['id']}/runs").json()["results"]
    assert shown["status"] == "delivering"
    assert "503" in shown["error"]
    Job.objects.filter(handler="scheduled_hook.deliver").update(status="pending", lease_expires_at=None)
    run_due_jobs(handler="scheduled_hook.deliver")
    (shown,) = owner_api.get(f"/api/v1/schedules/{hook['id']}/runs").json()["results"]
    assert (shown["status"], shown["error"], shown["detail"]["status_code"]) == ("succeeded", None, 200)
