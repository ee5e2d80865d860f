"""Job expiry: a deadline to start by, an index for the sweep, and relay_claim_jobs() reinstalled so a claim
never starts a job past its deadline."""

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
        ('accounts', '0005_account_time_zone'),
        ('jobs', '0008_job_result'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='expires_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('status__in', [jobs.domain.states.JobStatus['PENDING'], jobs.domain.states.JobStatus['RETRYING']]), ('expires_at__isnull', False)), fields=['expires_at'], name='job_due_expiry'),
        ),
        migrations.RunPython(install, migrations.RunPython.noop),
    ]
