from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The REST API's shared kernel: the conventions every app's `api/` package builds on (no models)."""

    name = "api"
    verbose_name = "REST API"
