"""The use cases of a run, one module each (find a use case by its name):

starting.py   start_run, start_runs (many contacts at once), record_event (an event starts what it triggers)
stepping.py   run_step (one attempt of the current step: the `workflow_step` job), end_wait (`workflow_resume`)
batches.py    run_steps (steps claimed together: the `workflow_step` batch handler)
operating.py  pause_run, resume_run, cancel_run, retry_run, job_died (the dead-letter hook), reconcile_stranded,
              cancel_jobs_of_contact
moves.py      what they share: the run's next move enacted on the queue, and the one job that may move a run
"""
