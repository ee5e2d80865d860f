"""The deploy check for autovacuum: the queue's tables must be vacuumed, with settings fit for a queue."""

import pytest

from jobs.checks import autovacuum_problems, check_autovacuum
from tests.support.queue_db import connection

pytestmark = pytest.mark.django_db


def _ids() -> set[str]:
    return {str(p.id) for p in autovacuum_problems()}


@pytest.mark.postgres
def test_the_server_setting_and_the_tables_settings_are_checked():
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        (server,) = cursor.fetchone()
    assert ("jobs.W001" in _ids()) == (server != "on")  # this machine runs with autovacuum = off
    assert not _ids() & {"jobs.W002", "jobs.W003"}  # the migration's storage parameters are safe

    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE jobs_job SET (autovacuum_enabled = false, autovacuum_vacuum_scale_factor = 0.2)")
    problems = {p.id: p for p in check_autovacuum()}
    assert {"jobs.W002", "jobs.W003"} <= set(problems)
    assert "jobs_job" in problems["jobs.W002"].msg
    assert "2,000,000 dead rows" in problems["jobs.W003"].msg


@pytest.mark.postgres
def test_the_check_runs_with_deploy_only():
    from django.core.checks import registry

    assert check_autovacuum in registry.registry.get_checks(include_deployment_checks=True)
    assert check_autovacuum not in registry.registry.get_checks(include_deployment_checks=False)


def test_sqlite_has_nothing_to_vacuum_for_the_queue():
    if connection.vendor == "sqlite":
        assert autovacuum_problems() == []


@pytest.mark.postgres
def test_with_autovacuum_off_the_warning_says_whether_the_workers_vacuum_the_queue(settings):
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        (server,) = cursor.fetchone()
    if server == "on":
        assert "jobs.W001" not in _ids()
        return
    settings.JOB_VACUUM = True
    (warning,) = [p for p in autovacuum_problems() if p.id == "jobs.W001"]
    assert "the workers vacuum the queue's own tables (JOB_VACUUM)" in warning.msg
    settings.JOB_VACUUM = False
    (warning,) = [p for p in autovacuum_problems() if p.id == "jobs.W001"]
    assert "nothing vacuums the queue's tables" in warning.msg
