"""Count an operator's retries of a failed run: each sends the run's webhooks as new messages (new webhook-id).

A constant default: PostgreSQL adds the column without rewriting the table.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0002_execution_in_flight_index'),
    ]

    operations = [
        migrations.AddField(
            model_name='workflowexecution',
            name='manual_retries',
            field=models.PositiveIntegerField(default=0),
        ),
    ]
