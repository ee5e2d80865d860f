"""Limits repair (jobs.application.maintenance.limits): the first pass runs at start, before a worker claims."""

import time

import pytest
from django.db import DEFAULT_DB_ALIAS

from jobs.application.maintenance.limits import LimitsRepair
from jobs.infrastructure.database import queue_database
from jobs.infrastructure.models import AccountLimit
from tests.factories import AccountFactory

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_first_pass_heals_a_lost_limit_at_once_and_the_next_waits_its_interval():
    account = AccountFactory(max_concurrent_jobs=3)
    AccountLimit.objects.filter(account_id=account.pk).delete()  # as if a crash lost it between two commits
    service = LimitsRepair(databases=(queue_database(), DEFAULT_DB_ALIAS))
    service.start()
    try:
        assert service.first_pass.wait(10)
        assert AccountLimit.objects.get(account_id=account.pk).max_concurrent_jobs == 3
        AccountLimit.objects.filter(account_id=account.pk).delete()
    finally:
        started = time.monotonic()
        assert service.stop() is True
    assert time.monotonic() - started < 2.0  # the five-minute wait ended at once
    assert not AccountLimit.objects.filter(account_id=account.pk).exists()  # no second pass came meanwhile
