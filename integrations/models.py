"""Django finds models here; they live in integrations.infrastructure.models."""

from integrations.infrastructure.models import WebhookSigningSecret

__all__ = ["WebhookSigningSecret"]
