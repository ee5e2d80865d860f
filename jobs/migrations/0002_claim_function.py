"""Install relay_claim_jobs(), the PostgreSQL claim (jobs/infrastructure/sql/claim_jobs.sql).

The SQL file is the source of truth; when it changes, add a migration that
runs it again (it is CREATE OR REPLACE). SQLite needs no function.
"""

from pathlib import Path

from django.db import migrations

SQL = Path(__file__).resolve().parent.parent / "infrastructure" / "sql" / "claim_jobs.sql"


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(SQL.read_text())


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS relay_claim_jobs(text, text[], integer, float8)")


class Migration(migrations.Migration):
    dependencies = [("jobs", "0001_initial"), ("accounts", "0001_initial")]

    operations = [migrations.RunPython(install, uninstall)]
