"""The partial index the stranded-run sweep reads (runs in flight), built without blocking writes.

On PostgreSQL it is built CONCURRENTLY: the runs table may be large and busy when this migration runs,
and a plain CREATE INDEX would block every step's update until it finished. Elsewhere, a plain AddIndex.
"""

from django.db import migrations, models


class AddIndexConcurrentlyOnPostgres(migrations.AddIndex):
    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            schema_editor.add_index(model, self.index, concurrently=True)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            schema_editor.remove_index(model, self.index, concurrently=True)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [("workflows", "0001_initial")]

    operations = [
        AddIndexConcurrentlyOnPostgres(
            model_name="workflowexecution",
            index=models.Index(
                condition=models.Q(("status__in", ["active", "queued", "waiting"])),
                fields=["id"],
                name="execution_in_flight",
            ),
        ),
    ]
