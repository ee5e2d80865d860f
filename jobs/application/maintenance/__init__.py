"""The worker's upkeep beside its executors, one service per file behind one start/stop interface (`service`):

- `rescue.LeaseRescue`: jobs whose worker died (their lease passed), and jobs that expired before they started
- `cron.CronFiring`: due schedules, each tick once
- `limits.LimitsRepair`: the accounts' limits copied to the queue's table (the first pass before any claim)
- `metrics.MetricsFlush`: this process's counts to the database, the gauges when it is this worker's turn
- `vacuum.QueueVacuuming`: the queue's tables, when autovacuum does not (PostgreSQL)
- `outbox.OutboxMover`: a caller database's outbox moved to the queue (the queue apart)
"""
