"""Per-account limits as the queue sees them."""

from accounts.domain.limits import DEFAULT_MAX_CONCURRENT_JOBS

# The running jobs an account may have when the queue holds no limit of its own for it (a new account whose
# limit has not reached the queue's database yet): the Account model's default. The claim's SQL
# (jobs.infrastructure.store) spells it as a literal 10: tests/unit/jobs/test_limits.py holds the two together.
DEFAULT_ACCOUNT_JOB_LIMIT = DEFAULT_MAX_CONCURRENT_JOBS
