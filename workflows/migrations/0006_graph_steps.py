"""The graph of steps (issue #11): every step gets a key; runs and their logs name their step by key.

Existing drafts and versions keep what they do: a step without `next` goes to the following one, so a
linear workflow is the same graph. Keys are `step_<n>` (n: 1-based position), the key a new step without
one gets too. Runs in flight get the key of the step they are at, and their log rows the key of theirs.
"""

from django.db import migrations, models

ENDED = ("completed", "cancelled")


def give_keys(apps, schema_editor):
    WorkflowStep = apps.get_model("workflows", "WorkflowStep")
    WorkflowVersion = apps.get_model("workflows", "WorkflowVersion")
    WorkflowExecution = apps.get_model("workflows", "WorkflowExecution")
    ExecutionLog = apps.get_model("workflows", "ExecutionLog")
    workflow_ids = WorkflowStep.objects.filter(key="").values_list("workflow_id", flat=True).distinct()
    for workflow_id in list(workflow_ids):
        steps = list(WorkflowStep.objects.filter(workflow_id=workflow_id).order_by("position", "id"))
        taken = {step.key for step in steps if step.key}
        for number, step in enumerate(steps, start=1):
            if not step.key:
                key = f"step_{number}"
                while key in taken:
                    key += "_"
                step.key = key
                taken.add(key)
                step.save(update_fields=["key"])
    for version in WorkflowVersion.objects.all().iterator():
        steps = version.steps if isinstance(version.steps, list) else []
        keys = []
        changed = False
        for number, step in enumerate(steps, start=1):
            if isinstance(step, dict) and not step.get("key"):
                step["key"] = f"step_{number}"
                changed = True
            keys.append(step.get("key") if isinstance(step, dict) else f"step_{number}")
        if changed:  # a version never changes in what it does; it only learns its steps' names
            WorkflowVersion.objects.filter(pk=version.pk).update(steps=steps)
        runs = WorkflowExecution.objects.filter(version_id=version.pk)
        for index, key in enumerate(keys):
            runs.filter(current_step_index=index).exclude(status__in=ENDED).update(current_step_key=key)
            ExecutionLog.objects.filter(execution__version_id=version.pk, step_index=index, step_key="").update(
                step_key=key
            )


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0005_workflow_track_email_engagement'),
    ]

    operations = [
        migrations.AddField(
            model_name='executionlog',
            name='decision',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name='executionlog',
            name='step_key',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.AddField(
            model_name='workflowexecution',
            name='current_step_key',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.AddField(
            model_name='workflowexecution',
            name='end_reason',
            field=models.CharField(blank=True, default='', max_length=300),
        ),
        migrations.AddField(
            model_name='workflowstep',
            name='key',
            field=models.CharField(default='', max_length=64),
        ),
        migrations.AddField(
            model_name='workflowstep',
            name='next_key',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.AlterField(
            model_name='workflowstep',
            name='action_type',
            field=models.CharField(choices=[('send_email', 'send email'), ('send_sms', 'send sms'), ('send_voice', 'send voice'), ('webhook', 'webhook'), ('wait', 'wait'), ('update_contact', 'update contact'), ('add_tag', 'add tag'), ('remove_tag', 'remove tag'), ('branch', 'branch'), ('split', 'split'), ('wait_for_event', 'wait for event'), ('end', 'end')], max_length=32),
        ),
        migrations.RunPython(give_keys, migrations.RunPython.noop, elidable=True),
        migrations.AddConstraint(
            model_name='workflowstep',
            constraint=models.UniqueConstraint(fields=('workflow', 'key'), name='workflow_step_key'),
        ),
    ]
