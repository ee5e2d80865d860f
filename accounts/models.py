"""Django finds an app's models here; they live in the infrastructure layer."""

from accounts.infrastructure.models import Account, ApiToken, AuditEvent, Membership

__all__ = ["Account", "ApiToken", "AuditEvent", "Membership"]
