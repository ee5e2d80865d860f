from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "integrations"
    verbose_name = "Integrations"

    def ready(self) -> None:
        from integrations import checks  # noqa: F401  (registers the system checks)
