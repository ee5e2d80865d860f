"""Django finds models here; they live in integrations.infrastructure.models."""

from integrations.infrastructure.models import SendingSettings, WebhookSigningSecret

__all__ = ["SendingSettings", "WebhookSigningSecret"]
