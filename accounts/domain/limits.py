"""The limits an account runs under, by default (each account may have its own)."""

# The jobs an account may have running at once on the queue, across all workers (Account.max_concurrent_jobs).
DEFAULT_MAX_CONCURRENT_JOBS = 10
