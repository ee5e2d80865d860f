"""The outbox (jobs_outbox): jobs queued inside a transaction on another database than the queue's, waiting
for a worker to move them (jobs.infrastructure.outbox). The router creates it in the callers' databases only,
never in the queue's own (JOBS_DATABASE); with one database it sits unused in `default`."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0015_claim_running_count_reads_job_running'),
    ]

    operations = [
        migrations.CreateModel(
            name='OutboxJob',
            fields=[
                ('id', models.UUIDField(primary_key=True, serialize=False)),
                ('queue', models.CharField(max_length=100)),
                ('handler', models.CharField(max_length=200)),
                ('payload', models.TextField()),
                ('priority', models.IntegerField()),
                ('run_at', models.DateTimeField()),
                ('max_attempts', models.PositiveIntegerField()),
                ('account_id', models.BigIntegerField(null=True)),
                ('created_by_id', models.BigIntegerField(null=True)),
                ('unique_key', models.CharField(max_length=200, null=True)),
                ('expires_at', models.DateTimeField(null=True)),
                ('created_at', models.DateTimeField()),
            ],
            options={
                'db_table': 'jobs_outbox',
            },
        ),
    ]
