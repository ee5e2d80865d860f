"""Reinstall relay_claim_jobs(): priority lanes, so jobs due later are never scanned by a claim."""

from pathlib import Path

from django.db import migrations

SQL = Path(__file__).resolve().parent.parent / "infrastructure" / "sql" / "claim_jobs.sql"


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(SQL.read_text())


class Migration(migrations.Migration):
    dependencies = [("jobs", "0002_claim_function")]

    operations = [migrations.RunPython(install, migrations.RunPython.noop)]
