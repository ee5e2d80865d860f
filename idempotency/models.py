"""Django finds an app's models here; they live in the infrastructure layer."""

from idempotency.infrastructure.models import IdempotencyRecord

__all__ = ["IdempotencyRecord"]
