from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        from django.conf import settings

        from jobs.application.registry import import_handler_modules

        import_handler_modules(["jobs.handlers", "jobs.tasks_backend", *settings.JOB_HANDLER_MODULES])
