"""Django finds an app's models here; they live in the infrastructure layer."""

from contacts.infrastructure.models import ConsentChange, Contact, ContactImport

__all__ = ["ConsentChange", "Contact", "ContactImport"]
