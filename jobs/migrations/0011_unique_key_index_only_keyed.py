"""Less database work per job: the unique-key index holds keyed jobs only (most jobs have no key: two index
writes fewer per job, its insert's and its claim's), and relay_claim_jobs() reinstalled (it stops after one
round when it saw every lane that could run).

Rebuilding the index scans jobs_job once under a SHARE lock (writes wait): seconds for millions of rows.
"""

from pathlib import Path

import jobs.domain.states
from django.conf import settings
from django.db import migrations, models


SQL = Path(__file__).resolve().parent.parent / "infrastructure" / "sql" / "claim_jobs.sql"


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(SQL.read_text())


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0006_account_track_email_engagement'),
        ('jobs', '0010_claim_lanes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='job',
            name='job_unique_key',
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.UniqueConstraint(condition=models.Q(('status__in', [jobs.domain.states.JobStatus['PENDING'], jobs.domain.states.JobStatus['RETRYING'], jobs.domain.states.JobStatus['RUNNING']]), ('unique_key__isnull', False)), fields=('unique_key',), name='job_unique_key'),
        ),
        migrations.RunPython(install, migrations.RunPython.noop),
    ]
