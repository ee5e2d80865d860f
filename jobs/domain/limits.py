"""Per-account limits as the queue sees them."""

# The running jobs an account may have when the queue holds no limit of its own for it (a new account whose
# limit has not reached the queue's database yet): the Account model's default.
DEFAULT_ACCOUNT_JOB_LIMIT = 10
