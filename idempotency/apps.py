from django.apps import AppConfig


class IdempotencyConfig(AppConfig):
    name = "idempotency"
    verbose_name = "Idempotency keys"

    def ready(self) -> None:
        from idempotency import handlers  # noqa: F401 - registers idempotency.purge
