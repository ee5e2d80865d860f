"""relay_claim_jobs() reinstalled: its running count names status alone, so its generic plan (made once per
connection) reads job_running, never job_account_newest (migration 0012), whatever the statistics were
when the plan was made (issue 15; tests/integration/jobs/test_job_indexes.py)."""

from pathlib import Path

from django.db import migrations

SQL = Path(__file__).resolve().parent.parent / "infrastructure" / "sql" / "claim_jobs.sql"


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(SQL.read_text())


class Migration(migrations.Migration):
    dependencies = [("jobs", "0014_account_limits")]

    operations = [migrations.RunPython(install, migrations.RunPython.noop)]
