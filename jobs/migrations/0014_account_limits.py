"""The queue's own copy of each account's limit (jobs_account_limit), filled from today's accounts, and
relay_claim_jobs() reinstalled to read it instead of accounts_account (which may live in another database
when the queue has one of its own, JOBS_DATABASE).

With the queue apart, the accounts are read from `default`; if that database is not migrated yet (a fresh
install migrating the queue's database first) nothing is copied here and every worker's repair at start
fills the table (jobs.application.limits.repair_limits).
"""

from pathlib import Path

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, migrations, models

SQL = Path(__file__).resolve().parent.parent / "infrastructure" / "sql" / "claim_jobs.sql"


def fill(apps, schema_editor):
    AccountLimit = apps.get_model("jobs", "AccountLimit")
    Account = apps.get_model("accounts", "Account")
    alias = schema_editor.connection.alias
    if alias == DEFAULT_DB_ALIAS:
        rows = list(Account.objects.using(alias).values_list("pk", "max_concurrent_jobs"))
    else:
        try:
            rows = list(Account.objects.using(DEFAULT_DB_ALIAS).values_list("pk", "max_concurrent_jobs"))
        except DatabaseError:
            connections[DEFAULT_DB_ALIAS].close()
            return
    AccountLimit.objects.using(alias).bulk_create(
        [AccountLimit(account_id=pk, max_concurrent_jobs=limit) for pk, limit in rows], batch_size=5000
    )


def install(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(SQL.read_text())


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0006_account_track_email_engagement'),
        ('jobs', '0013_job_foreign_keys_unconstrained'),
    ]

    operations = [
        migrations.CreateModel(
            name='AccountLimit',
            fields=[
                ('account_id', models.BigIntegerField(primary_key=True, serialize=False)),
                ('max_concurrent_jobs', models.PositiveIntegerField()),
            ],
            options={
                'db_table': 'jobs_account_limit',
                'constraints': [models.CheckConstraint(condition=models.Q(('max_concurrent_jobs__gte', 1)), name='account_limit_runs_a_job')],
            },
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.RunPython(install, migrations.RunPython.noop),
    ]
