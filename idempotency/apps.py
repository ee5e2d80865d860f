from django.apps import AppConfig


class IdempotencyConfig(AppConfig):
    """Idempotency-Key records: a leaf; its hourly purge is put on the queue by config.handlers."""

    name = "idempotency"
    verbose_name = "Idempotency keys"
