"""Contact use cases. Every write goes through here, so every change emits its event."""

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from contacts.application import events
from contacts.domain.model import (
    ConsentChannel,
    ConsentSource,
    ContactError,
    normalize_tag,
    with_tag,
)
from contacts.infrastructure.models import ConsentChange, Contact
from contacts.infrastructure.store import ContactStore, as_contact

# Fields a caller may set directly; consent changes go through set_consent.
EDITABLE_FIELDS = ("email", "phone", "first_name", "last_name")


def _check_fields(fields: dict[str, Any]) -> None:
    for name, value in fields.items():
        if name == "custom_fields":
            if not isinstance(value, dict):
                raise ContactError("custom_fields", "must be an object")
        elif name not in EDITABLE_FIELDS:
            raise ContactError(name, "is not a contact field")
        elif not isinstance(value, str):
            raise ContactError(name, "must be a string")


@transaction.atomic
def contact_create(
    *,
    account_id: int,
    consent: Mapping[ConsentChannel, bool] | None = None,
    consent_source: ConsentSource | None = None,
    **fields: Any,
) -> Contact:
    """A new contact. `consent` (e.g. {EMAIL: True} for unsubscribed) is recorded in the same transaction."""
    tags = fields.pop("tags", [])
    _check_fields(fields)
    contact = Contact(account_id=account_id, **fields)
    for tag in tags:
        contact.tags, _ = with_tag(contact.tags, tag)
    contact.full_clean(exclude=["account"])
    _save_unique(contact)
    events.publish(events.ContactEvent(account_id, contact.pk, events.CONTACT_CREATED, {}))
    for tag in contact.tags:
        events.publish(events.ContactEvent(account_id, contact.pk, events.TAG_ADDED, {"tag": tag}))
    return _apply_consent(contact, consent, consent_source)


def contact_update(
    *,
    contact_id: int,
    fields: dict[str, Any],
    merge_custom_fields: bool = True,
    consent: Mapping[ConsentChannel, bool] | None = None,
    consent_source: ConsentSource | None = None,
) -> Contact:
    """Set fields; custom fields are merged key by key unless told to replace them.

    `consent` changes are recorded (ConsentChange) in the same transaction. Input is checked before any
    write, so a bad value leaves a caller's transaction usable (the workflow engine records it as the
    step's failure).
    """
    _check_fields(fields)
    _check_values(fields)
    store = ContactStore()
    duplicate_email = False
    with transaction.atomic(savepoint=False):  # on the hot path of update steps: no savepoint round trips
        row = store.lock(contact_id)
        changes: dict[str, Any] = {}
        for name, value in fields.items():
            if name == "custom_fields":
                value = {**row["custom_fields"], **value} if merge_custom_fields else dict(value)
            if row[name] != value:
                changes[name] = value
        if changes.get("email") and store.email_taken(row["account_id"], changes["email"], contact_id):
            duplicate_email = True
        elif changes:
            row.update(changes, updated_at=store.update(contact_id, changes))
            events.publish(
                events.ContactEvent(row["account_id"], contact_id, events.CONTACT_UPDATED, {"changed": list(changes)})
            )
    if duplicate_email:
        raise ContactError("email", "another contact in this account has this email address")
    return _apply_consent(as_contact(row), consent, consent_source)


def _check_values(fields: dict[str, Any]) -> None:
    """Each value against its model field's own rules (email format, length), before any write."""
    for name, value in fields.items():
        if name == "custom_fields":
            continue
        try:
            Contact._meta.get_field(name).run_validators(value)
        except ValidationError as exc:
            raise ContactError(name, " ".join(exc.messages)) from None


def _save_unique(contact: Contact, update_fields: list[str] | None = None) -> None:
    """Save; the account's one-contact-per-email constraint becomes a ContactError naming the email."""
    try:
        with transaction.atomic():
            contact.save(update_fields=update_fields)
    except IntegrityError:
        if not contact.email:
            raise
        raise ContactError("email", "another contact in this account has this email address") from None


def _apply_consent(
    contact: Contact, consent: Mapping[ConsentChannel, bool] | None, source: ConsentSource | None
) -> Contact:
    if not consent:
        return contact
    if source is None:
        raise ValueError("a consent change needs its source")
    for channel, opted_out in consent.items():
        contact, _ = contact_set_consent(contact_id=contact.pk, channel=channel, opted_out=opted_out, source=source)
    return contact


@transaction.atomic
def contact_delete(*, contact_id: int) -> None:
    """Delete a contact and its consent history. `contact.deleted` is published first, in the same
    transaction, so subscribers (the workflow engine) can stop what runs for it."""
    contact = Contact.objects.select_for_update().get(pk=contact_id)
    events.publish(events.ContactEvent(contact.account_id, contact.pk, events.CONTACT_DELETED, {}))
    contact.delete()


def contact_add_tag(*, contact_id: int, tag: str) -> tuple[Contact, bool]:
    tag = normalize_tag(tag)  # before any write: a bad tag leaves a caller's transaction usable
    store = ContactStore()
    with transaction.atomic(savepoint=False):  # on the hot path of tag steps: no savepoint round trips
        row, added = store.add_tag(contact_id, tag)
        if added:
            events.publish(events.ContactEvent(row["account_id"], contact_id, events.TAG_ADDED, {"tag": tag}))
    return as_contact(row), added


def contact_remove_tag(*, contact_id: int, tag: str) -> tuple[Contact, bool]:
    tag = normalize_tag(tag)
    store = ContactStore()
    with transaction.atomic(savepoint=False):
        row, removed = store.remove_tag(contact_id, tag)
        if removed:
            events.publish(events.ContactEvent(row["account_id"], contact_id, events.TAG_REMOVED, {"tag": tag}))
    return as_contact(row), removed


@transaction.atomic
def contact_set_consent(
    *, contact_id: int, channel: ConsentChannel, opted_out: bool, source: ConsentSource, detail: str = ""
) -> tuple[Contact, bool]:
    """Record a consent change; repeating the current state changes nothing and records nothing."""
    contact = Contact.objects.select_for_update().get(pk=contact_id)
    field = "unsubscribed" if ConsentChannel(channel) is ConsentChannel.EMAIL else "sms_opted_out"
    if getattr(contact, field) == opted_out:
        return contact, False
    setattr(contact, field, opted_out)
    contact.save(update_fields=[field, "updated_at"])
    ConsentChange.objects.create(
        contact=contact, channel=channel, opted_out=opted_out, source=source, detail=detail[:200]
    )
    return contact, True
