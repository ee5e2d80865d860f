"""Django finds an app's models here; they live in the infrastructure layer."""

from contacts.infrastructure.models import ConsentChange, Contact, ContactImport, Event

__all__ = ["ConsentChange", "Contact", "ContactImport", "Event"]
