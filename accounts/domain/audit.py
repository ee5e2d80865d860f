"""What the audit log records: the actions a regulator or an account's owner may ask about later. Plain Python."""

from enum import StrEnum


class AuditAction(StrEnum):
    # A file of the account's contacts left Relay: detail {"rows": n, "format": "csv" | "xlsx", "via": ...}.
    CONTACTS_EXPORTED = "contacts.exported"
