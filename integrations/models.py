"""Django finds models here; they live in integrations.infrastructure.models."""

from integrations.infrastructure.models import OutboundMessage, SendingSettings, WebhookSigningSecret

__all__ = ["OutboundMessage", "SendingSettings", "WebhookSigningSecret"]
