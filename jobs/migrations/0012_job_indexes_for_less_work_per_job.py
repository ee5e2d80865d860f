"""Less database work per job (issue 15): no index on created_at.

A claim and a completion each write a new row version, and since status is in other indexes' predicates
the updates are never HOT: every index gets a new entry at the insert, the claim and the completion. The
two created_at indexes were 6 of a job's 11 entries. Newest-first lists read the primary key backwards
(ids are uuid7, made at enqueue: jobs.domain.ids), an account's list reads (account, id), and jobs of no
account (system jobs) have no entry there at all.

Building job_account_newest scans jobs_job once under a SHARE lock (writes wait): seconds for millions of
rows. Reversible (the old indexes are rebuilt the same way).
"""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0006_account_track_email_engagement'),
        ('jobs', '0011_unique_key_index_only_keyed'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='job',
            options={'ordering': ['-id']},
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('account__isnull', False)), fields=['account', 'id'], name='job_account_newest'),
        ),
        migrations.RemoveIndex(
            model_name='job',
            name='job_account_created',
        ),
        migrations.RemoveIndex(
            model_name='job',
            name='job_created',
        ),
    ]
