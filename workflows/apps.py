from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"

    def ready(self) -> None:
        from django.db import DEFAULT_DB_ALIAS
        from django.db.models.signals import post_delete, post_migrate

        from contacts.application.events import on_many_events, subscribe
        from jobs.public.operations import register_tables
        from jobs.public.schedules import builtin_schedule
        from workflows import (  # handlers: the workflow jobs; the reconcile handler
            admin_extensions,
            admin_roles,  # the role groups, kept in step at every migrate
            handlers,
        )
        from workflows.application import metrics
        from workflows.application.events import on_contact_event, on_workflow_deleted
        from workflows.application.runs.goals import listening_read_once
        from workflows.application.trigger_cache import listen_for_trigger_changes
        from workflows.infrastructure.models import EventWait, Workflow, WorkflowExecution

        subscribe(on_contact_event)
        on_many_events(listening_read_once)  # an import's events: each account's waits and goals read once
        # A run's row is updated at every step and a wait is inserted and deleted: the workers vacuum them when
        # autovacuum does not, as they do the queue's tables.
        register_tables(DEFAULT_DB_ALIAS, [WorkflowExecution._meta.db_table, EventWait._meta.db_table])
        listen_for_trigger_changes()  # workers drop their cached triggers when a workflow changes
        metrics.register()  # runs started/finished, runs by status, runs against the accounts' limits
        admin_extensions.register()  # a contact's runs, "enroll them" after an import, a step job's run
        # Behind the dead-letter hook: runs held by a job that ended dead, failed, cancelled or was purged.
        builtin_schedule("relay.reconcile_runs", cron="*/5 * * * *", handler=handlers.RECONCILE_HANDLER)
        builtin_schedule("relay.purge_hook_runs", cron="23 4 * * *", handler=handlers.PURGE_RUNS_HANDLER)
        # However a workflow is deleted (the admin's delete, a cascade from its account), workers must forget
        # its event triggers, as they do on every status move.
        post_migrate.connect(admin_roles.sync_admin_roles_after_migrate, dispatch_uid="relay.workflows.admin_roles")
        post_delete.connect(on_workflow_deleted, sender=Workflow, dispatch_uid="relay.workflows.deleted")
