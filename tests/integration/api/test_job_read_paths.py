"""The stored-error rules hold on every read path: a row written before a rule existed, or by SQL, never shows a
secret URL, a DETAIL line or more than 1,000 characters through the API or the admin."""

import pytest
from django.urls import reverse

from jobs.domain.states import JobStatus
from jobs.models import Job

pytestmark = pytest.mark.django_db

RAW = (
    "ServerFailure: 503 from https://user:pw@hooks.example.com/T000/SECRETPATH?token=SECRETQUERY\n"
    "DETAIL: Key (email)=(secret-person@example.com) already exists. " + "x" * 3000
)


@pytest.fixture
def dirty_job(account, make_job):
    job = make_job(account=account, status=JobStatus.DEAD)
    Job.objects.filter(pk=job.pk).update(error_message=RAW)  # as SQL or an old version wrote it
    return job


def _clean(text: str) -> None:
    assert text.startswith("ServerFailure: 503 from https://hooks.example.com")
    for secret in ("SECRETPATH", "SECRETQUERY", "pw@", "secret-person", "DETAIL"):
        assert secret not in text
    assert len(text) <= 1000


def test_the_account_and_operator_endpoints_show_the_error_by_the_rule(owner_api, operator_api, dirty_job):
    _clean(owner_api.get(f"/api/v1/jobs/{dirty_job.pk}").json()["last_error"])
    _clean(owner_api.get("/api/v1/jobs").json()["results"][0]["last_error"])
    _clean(operator_api.get(f"/api/v1/admin/jobs/{dirty_job.pk}").json()["last_error"])
    _clean(operator_api.get("/api/v1/admin/jobs").json()["results"][0]["last_error"])


def test_the_admin_shows_the_error_by_the_rule(client, superuser, dirty_job):
    client.force_login(superuser)
    page = client.get(reverse("admin:jobs_job_change", args=[dirty_job.pk])).content.decode()
    assert "ServerFailure: 503 from https://hooks.example.com" in page
    for secret in ("SECRETPATH", "SECRETQUERY", "secret-person"):
        assert secret not in page
