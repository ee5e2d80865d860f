"""An app's cron schedules on the queue: each tick queues its job once, however many workers run.

    from jobs.public import schedules

    schedules.builtin_schedule("relay.purge_hook_runs", cron="23 4 * * *", handler="workflows.purge_hook_runs")
    hook_schedule = schedules.schedule_create(name="hook:12", cron="0 9 * * 1", timezone="Europe/Paris",
                                              handler="scheduled_hook", payload={"hook": 12})
    schedules.schedule_pause(schedule_id=hook_schedule.pk)    # schedule_resume, schedule_delete alike

`builtin_schedule` names one the app needs to work (from its AppConfig.ready; JOB_SCHEDULES may override it).
The others manage a schedule an app makes for its own users (a workflow's scheduled hook): the first tick, and
the next after a resume, are computed on the database's clock. `schedule_problems` says what is wrong with a
schedule before it is made, by field. The Schedule rows are the queue's: no other app writes them.
"""

from jobs.application.schedules import (
    builtin_schedule,
    schedule_create,
    schedule_delete,
    schedule_pause,
    schedule_problems,
    schedule_resume,
)

__all__ = [
    "builtin_schedule",
    "schedule_create",
    "schedule_delete",
    "schedule_pause",
    "schedule_problems",
    "schedule_resume",
]
