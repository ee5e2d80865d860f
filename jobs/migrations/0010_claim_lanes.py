"""Claim lanes: jobs_lane kept in step with jobs_job by triggers, relay_claim_jobs() reading lanes, and the
queue's tables' storage parameters (autovacuum, fillfactor).

An account at its max_concurrent_jobs costs a claim one lane row, not a walk over its waiting jobs
(issue 15; docs/decisions/fair-claims.md). The lanes of jobs already waiting are filled in after the triggers
exist (CREATE TRIGGER locks jobs_job until this migration commits, so no job is missed).
"""

from pathlib import Path

import django.db.models.functions.comparison
import jobs.domain.states
from django.conf import settings
from django.db import migrations, models


SQL = Path(__file__).resolve().parent.parent / "infrastructure" / "sql"

BACKFILL = """
    INSERT INTO jobs_lane (account_id, queue, priority, next_due_at, served_at)
    SELECT coalesce(account_id, 0), queue, priority, min(run_at), '1970-01-01 00:00:00+00'
    FROM jobs_job WHERE status IN ('pending', 'retrying')
    GROUP BY 1, 2, 3
    ON CONFLICT (account_id, queue, priority) DO NOTHING
"""


# Storage for a queue (jobs.checks warns when these are undone or autovacuum is off):
# - jobs_job: every job is inserted, updated twice and deleted, so vacuum it after 1 % of its rows are dead
#   (the default 20 % is 2,000,000 dead rows in a 10,000,000-row table), analyze after 2 %, and let the
#   vacuum run at full speed (cost delay 1 ms). fillfactor 90: a claim's or a completion's new row version
#   usually fits on the same page (fewer pages dirtied; the updates cannot be HOT, status is in the indexes'
#   predicates).
# - jobs_lane: every claim rewrites a few lane rows; fillfactor 50 leaves room for the new versions on the
#   same page, so the updates stay HOT and are pruned without any VACUUM.
STORAGE = """
    ALTER TABLE jobs_job SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
                              autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02,
                              autovacuum_vacuum_cost_delay = 1, fillfactor = 90);
    ALTER TABLE jobs_lane SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01,
                               autovacuum_vacuum_threshold = 200)
"""


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute((SQL / "lanes.sql").read_text())
        schema_editor.execute((SQL / "claim_jobs.sql").read_text())
        schema_editor.execute(BACKFILL)
        schema_editor.execute(STORAGE)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP TRIGGER IF EXISTS relay_lanes_insert ON jobs_job")
        schema_editor.execute("DROP TRIGGER IF EXISTS relay_lanes_update ON jobs_job")


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0005_account_time_zone'),
        ('jobs', '0009_job_expiry'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Lane',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('account_id', models.BigIntegerField()),
                ('queue', models.CharField(max_length=100)),
                ('priority', models.IntegerField()),
                ('next_due_at', models.DateTimeField()),
                ('served_at', models.DateTimeField()),
            ],
        ),
        migrations.RemoveIndex(
            model_name='job',
            name='job_claim',
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(django.db.models.functions.comparison.Coalesce(models.F('account'), models.Value(0)), models.F('queue'), models.F('priority'), models.F('run_at'), models.F('id'), condition=models.Q(('status__in', [jobs.domain.states.JobStatus['PENDING'], jobs.domain.states.JobStatus['RETRYING']])), name='job_lane_claim'),
        ),
        migrations.AddConstraint(
            model_name='lane',
            constraint=models.UniqueConstraint(fields=('account_id', 'queue', 'priority'), name='lane_key'),
        ),
        migrations.RunPython(install, uninstall),
    ]
