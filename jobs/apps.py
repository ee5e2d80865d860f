from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        from django.conf import settings

        from jobs.application.registry import import_handler_modules

        import_handler_modules(["jobs.handlers", "jobs.tasks_backend", *settings.JOB_HANDLER_MODULES])

        from django.core.signals import request_finished

        from jobs import checks  # noqa: F401 - registers the queue's system checks
        from jobs.application import tenancy
        from jobs.application.metrics import flush_after_request

        request_finished.connect(flush_after_request, dispatch_uid="relay.metrics.flush")
        tenancy.connect()  # the queue's copy of each account's limit, and deletes reaching its jobs

        from jobs.infrastructure.clock import transaction_now
        from kernel import clock

        clock.read_with(transaction_now)  # every app's "now" is the database's (docs/decisions/database-clock.md)
