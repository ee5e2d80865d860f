"""The chaos suite's fixtures: the test database's URL for the invariants (with the job history recorded), the
effect table, the records file, each scenario's plan (its share of the time budget and the sizes it runs),
fleets of workers killed once checked, the session's private cluster, and (from the workflow end-to-end tests)
a webhook server on loopback the SSRF guard lets through."""

from collections.abc import Callable, Iterator

import pytest

import tests.chaos.handlers  # noqa: F401 - registers chaos.work in this process, so enqueue accepts it
from tests.chaos import history
from tests.chaos.budget import BUDGET, BY_TEST, SCENARIOS, BudgetExhausted, Plan
from tests.chaos.harness import Fleet, PrivateCluster, effect_table
from tests.e2e.workflows.conftest import _loopback_webhooks, webhook_server  # noqa: F401 - fixtures
from tests.support.processes import test_database_url


@pytest.fixture
def plan(request) -> Iterator[Plan]:
    """This scenario's share of the budget and the sizes it runs (tests/chaos/budget.py). Asked first by a
    scenario, so its time includes its workers' start and stop. No room left: the scenario fails, named."""
    try:
        found = BUDGET.plan(request.node.originalname)
    except BudgetExhausted as exc:
        refused = str(exc)
    else:
        refused = ""
    if refused:
        pytest.fail(refused, pytrace=False)
    yield found
    BUDGET.finished(found)


@pytest.fixture
def url(transactional_db) -> Iterator[str]:
    """The test database, as the invariants (psycopg) and the workers read it; the effect table emptied, and
    the job history recorded (tests/chaos/history.py) for this test only."""
    found = test_database_url()
    effect_table(found)
    history.install(found)
    yield found
    history.remove(found)


@pytest.fixture
def fleet(start_worker) -> Iterator[Callable[..., Fleet]]:
    """Make fleets of workers (harness.Fleet); what is left of them is killed once the scenario is done."""
    made: list[Fleet] = []

    def make(**kwargs) -> Fleet:
        found = Fleet(start_worker, **kwargs)
        made.append(found)
        return found

    yield make
    for each in made:
        each.kill_all()


@pytest.fixture(scope="session")
def private_cluster() -> Iterator[PrivateCluster]:
    cluster = PrivateCluster()
    yield cluster
    cluster.remove()


@pytest.fixture
def runs_path(tmp_path) -> str:
    return str(tmp_path / "runs.jsonl")


def pytest_collection_modifyitems(config, items) -> None:
    """With a budget, the scenarios run in the budget's order (fixed ones first, the time-sized load last), in
    the places the chaos tests had."""
    if not BUDGET.on:
        return
    order = {scenario.test: n for n, scenario in enumerate(SCENARIOS)}
    places = [n for n, item in enumerate(items) if getattr(item, "originalname", item.name) in BY_TEST]
    ordered = sorted((items[n] for n in places), key=lambda item: order[getattr(item, "originalname", item.name)])
    for n, item in zip(places, ordered, strict=True):
        items[n] = item


def pytest_collection_finish(session) -> None:
    BUDGET.expect([getattr(item, "originalname", item.name) for item in session.items])


def pytest_terminal_summary(terminalreporter) -> None:
    if not BUDGET.plans and not BUDGET.refused:
        return
    if BUDGET.on:
        spent = BUDGET.seconds - BUDGET.left()
        terminalreporter.write_line(f"chaos budget: {spent:.0f} s of {BUDGET.seconds:.0f} s used")
    for line in BUDGET.summary():
        terminalreporter.write_line(line, red="NOT RUN" in line)
