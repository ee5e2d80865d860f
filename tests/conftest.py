"""Shared fixtures. Tests marked `postgres` are skipped on SQLite; CI fails if they are skipped on PostgreSQL."""

import pytest
from django.conf import settings

import tests.support.handlers  # noqa: F401 - registers the test handlers in this process
from tests.factories import AccountFactory, ContactFactory, MembershipFactory, UserFactory


def _on_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def _has_chromium() -> bool:
    import shutil

    return bool((shutil.which("chromium") or shutil.which("chromium-browser")) and shutil.which("chromedriver"))


def _queue_apart() -> bool:
    from jobs.infrastructure.database import is_split

    return is_split()


def _every_database(items) -> None:
    """With the queue in its own database (alias `jobs`), every test that uses a database may use both:
    pytest-django then makes (and routes to) a test database for each alias, never the real one."""
    if len(settings.DATABASES) < 2:
        return
    for item in items:
        marker = item.get_closest_marker("django_db")
        if marker is None and not {"db", "transactional_db", "live_server"} & set(getattr(item, "fixturenames", ())):
            continue
        args = marker.args if marker else ()
        kwargs = {**(marker.kwargs if marker else {}), "databases": "__all__"}
        item.add_marker(pytest.mark.django_db(*args, **kwargs), append=False)


def pytest_collection_modifyitems(config, items):
    _every_database(items)
    if not _queue_apart():
        shared = pytest.mark.skip(reason="the queue shares `default` (set JOBS_DATABASE_URL to a second database)")
        for item in items:
            if "queue_apart" in item.keywords:
                item.add_marker(shared)
    if not _has_chromium():
        no_browser = pytest.mark.skip(reason="needs Chromium: apt-get install chromium chromium-driver")
        for item in items:
            if "browser" in item.keywords:
                item.add_marker(no_browser)
    if _on_postgres():
        return
    skip = pytest.mark.skip(reason="PostgreSQL only (set DATABASE_URL to a PostgreSQL database)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Factory users hash a password each; the real hasher costs ~0.5 s a user on this machine."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _no_cached_signing_secrets():
    """Rolled-back tests reuse account ids; a secret cached by an earlier test must not sign for a later one."""
    from integrations.application.secrets import forget_cached_secrets

    forget_cached_secrets()
    yield
    forget_cached_secrets()


@pytest.fixture
def account(db):
    return AccountFactory()


@pytest.fixture
def other_account(db):
    return AccountFactory()


@pytest.fixture
def contact(account):
    return ContactFactory(account=account)


@pytest.fixture
def owner(account):
    return MembershipFactory(account=account, role="owner").user


@pytest.fixture
def superuser(db):
    return UserFactory(is_superuser=True, is_staff=True)


@pytest.fixture
def no_autovacuum():
    """jobs_job as on a server with autovacuum off, whatever this one's setting: autovacuum cannot step in
    before the workers' own VACUUM (jobs.application.vacuum) does. PostgreSQL only."""
    from tests.support.queue_db import connection

    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE jobs_job SET (autovacuum_enabled = false)")
    yield
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE jobs_job RESET (autovacuum_enabled)")


@pytest.fixture
def start_worker(tmp_path):
    """Start real runworker processes; all are stopped (SIGTERM, then SIGKILL) after the test."""
    from tests.support.processes import WorkerProcess

    started: list[WorkerProcess] = []

    def start(*args: str, **env: str) -> WorkerProcess:
        worker = WorkerProcess(*args, log_path=tmp_path / f"worker{len(started)}.log", **env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop(timeout=15)


# --- CI guard: PostgreSQL-only tests must run when the database is PostgreSQL ---------
_skipped_postgres_tests: list[str] = []
_ran_postgres_tests: list[str] = []
_skipped_browser_tests: list[str] = []
_skipped_apart_tests: list[str] = []


def pytest_runtest_logreport(report):
    if "browser" in report.keywords and report.skipped and _on_postgres():
        _skipped_browser_tests.append(report.nodeid)
    if "queue_apart" in report.keywords and report.skipped:
        _skipped_apart_tests.append(report.nodeid)
        if not _queue_apart():
            return  # not a PostgreSQL test skipped: the run has one database (RELAY_REQUIRE_QUEUE_APART holds it)
    if "postgres" not in report.keywords:
        return
    if report.skipped:
        _skipped_postgres_tests.append(report.nodeid)
    elif report.when == "call":
        _ran_postgres_tests.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    import os

    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if os.environ.get("RELAY_REQUIRE_BROWSER") == "1" and _skipped_browser_tests:
        reporter.write_line(
            f"CI GUARD FAILED: {len(_skipped_browser_tests)} browser tests were skipped on PostgreSQL "
            f"(is chromium-driver installed?): {_skipped_browser_tests[:5]}",
            red=True,
        )
        session.exitstatus = 1
    if os.environ.get("RELAY_REQUIRE_QUEUE_APART") == "1" and (_skipped_apart_tests or not _queue_apart()):
        reporter.write_line(
            f"CI GUARD FAILED: RELAY_REQUIRE_QUEUE_APART=1 but the queue shares `default` or"
            f" {len(_skipped_apart_tests)} queue_apart tests were skipped: {_skipped_apart_tests[:5]}",
            red=True,
        )
        session.exitstatus = 1
    if os.environ.get("RELAY_REQUIRE_POSTGRES") != "1":
        return
    problems = []
    if not _on_postgres():
        problems.append("RELAY_REQUIRE_POSTGRES=1 but DATABASE_URL is not PostgreSQL")
    if _skipped_postgres_tests:
        problems.append(
            f"{len(_skipped_postgres_tests)} PostgreSQL-only tests were skipped: {_skipped_postgres_tests[:5]}"
        )
    if not _ran_postgres_tests and session.testscollected:
        problems.append("no PostgreSQL-only test ran")
    if problems:
        for line in problems:
            reporter.write_line(f"CI GUARD FAILED: {line}", red=True)
        session.exitstatus = 1
    elif reporter:
        reporter.write_line(f"CI guard: {len(_ran_postgres_tests)} PostgreSQL-only tests ran, none skipped.")
