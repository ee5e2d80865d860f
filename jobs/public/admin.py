"""The queue's admin, as other apps' admins extend and read it.

- `job_links`: append a function job -> [(label, url)] (from your AppConfig.ready) and a job's page links to
  what it carries (a workflow run) without the queue knowing that app;
- `jobs_shown_to`: of some jobs, those a request may see on an admin site (its roles' permission on jobs).
"""

from jobs.admin import job_links, jobs_shown_to

__all__ = ["job_links", "jobs_shown_to"]
