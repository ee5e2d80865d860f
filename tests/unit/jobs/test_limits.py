"""The default limit of an account's running jobs has one value: the Account model's default (accounts' domain),
which the queue falls back to for an account it holds no limit for, and which the claim's SQL spells out."""

import re
from pathlib import Path

from accounts.domain.limits import DEFAULT_MAX_CONCURRENT_JOBS
from jobs.domain.limits import DEFAULT_ACCOUNT_JOB_LIMIT
from jobs.infrastructure import store


def test_the_claim_falls_back_to_the_accounts_default_limit():
    spelled = re.findall(r"max_concurrent_jobs, (\d+)\)", Path(store.__file__).read_text())
    assert spelled, "the claim's fallback limit was not found in jobs/infrastructure/store.py"
    assert {int(n) for n in spelled} == {DEFAULT_ACCOUNT_JOB_LIMIT} == {DEFAULT_MAX_CONCURRENT_JOBS}
