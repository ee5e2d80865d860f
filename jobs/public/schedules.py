"""An app's cron schedules on the queue: each tick queues its job once, however many workers run.

    from jobs.public.schedules import builtin_schedule

    builtin_schedule("relay.purge_hook_runs", cron="23 4 * * *", handler="workflows.purge_hook_runs")

`builtin_schedule` names one the app needs to work (from its AppConfig.ready; JOB_SCHEDULES may override it).
"""

from jobs.application.schedules import builtin_schedule

__all__ = ["builtin_schedule"]
