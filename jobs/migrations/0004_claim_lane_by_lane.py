"""Reinstall relay_claim_jobs(): lanes walked one at a time (fewer rows locked), lease clock read after the lock."""

from pathlib import Path

from django.db import migrations

SQL = Path(__file__).resolve().parent.parent / "infrastructure" / "sql" / "claim_jobs.sql"


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(SQL.read_text())


class Migration(migrations.Migration):
    dependencies = [("jobs", "0003_claim_by_priority_lanes")]

    operations = [migrations.RunPython(install, migrations.RunPython.noop)]
