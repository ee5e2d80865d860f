"""Contact use cases. Every write goes through here, so every change emits its event."""

from collections.abc import Mapping
from typing import Any, cast

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction

from contacts.application import events
from contacts.domain.clock import normalize_time_zone
from contacts.domain.model import (
    ConsentChannel,
    ConsentSource,
    ContactError,
    changed_custom_fields,
    check_reachable,
    normalize_phone,
    normalize_tag,
    normalize_tags,
    tags_full,
    too_many_tags,
)
from contacts.infrastructure.models import ConsentChange, Contact
from contacts.infrastructure.store import ContactStore, as_contact

# Fields a caller may set directly; consent changes are given apart (`consent=`), as each one is recorded.
EDITABLE_FIELDS = ("email", "phone", "first_name", "last_name", "time_zone")
# The contact column that holds each channel's opt-out.
CONSENT_FIELDS: dict[ConsentChannel, str] = {ConsentChannel.EMAIL: "unsubscribed", ConsentChannel.SMS: "sms_opted_out"}


def _check_fields(fields: dict[str, Any], *, stored_phone_may_stay: bool = False) -> ContactError | None:
    """Types and names; the phone respelled (`normalize_phone`). With `stored_phone_may_stay`, a phone that
    is no phone number is returned rather than raised: an update may send back the value stored before
    phones were checked, and only a change to it is refused."""
    for name, value in fields.items():
        if name == "custom_fields":
            if not isinstance(value, dict):
                raise ContactError("custom_fields", "must be an object")
        elif name not in EDITABLE_FIELDS:
            raise ContactError(name, "is not a contact field")
        elif not isinstance(value, str):
            raise ContactError(name, "must be a string")
    if "time_zone" in fields:  # one spelling (Europe/Paris), or "" for none: derived from the phone or the account
        fields["time_zone"] = normalize_time_zone(fields["time_zone"])
    if "phone" in fields:
        try:
            fields["phone"] = normalize_phone(fields["phone"])  # one spelling, so an inbound STOP finds it
        except ContactError as error:
            if not stored_phone_may_stay:
                raise
            return error
    return None


@transaction.atomic
def contact_create(
    *,
    account_id: int,
    consent: Mapping[ConsentChannel, bool] | None = None,
    consent_source: ConsentSource | None = None,
    **fields: Any,
) -> Contact:
    """A new contact. `consent` (e.g. {EMAIL: True} for unsubscribed) is stored with it and recorded before
    `contact.created` is published, so the workflows it starts see the contact's consent as it will stay."""
    tags = fields.pop("tags", [])
    _check_fields(fields)
    opt_outs = _check_consent(consent, consent_source)
    contact = Contact(account_id=account_id, **fields, **opt_outs)
    contact.tags = normalize_tags(tags)
    check_reachable(contact.email, contact.phone)
    contact.full_clean(exclude=["account"])
    _save_unique(contact)
    # A new contact starts opted in: only an opt-out is a change of consent.
    _record_consent(contact.pk, {name: True for name, value in opt_outs.items() if value}, consent_source)
    events.publish(events.ContactEvent(account_id, contact.pk, events.CONTACT_CREATED, {}))
    for tag in contact.tags:
        events.publish(events.ContactEvent(account_id, contact.pk, events.TAG_ADDED, {"tag": tag}))
    return contact


def contact_update(
    *,
    contact_id: int,
    fields: dict[str, Any],
    merge_custom_fields: bool = True,
    consent: Mapping[ConsentChannel, bool] | None = None,
    consent_source: ConsentSource | None = None,
    locked_row: Mapping[str, Any] | None = None,
) -> Contact:
    """Set fields; custom fields are merged key by key unless told to replace them.

    `locked_row`: the contact's whole row (`ContactStore` columns) as the caller read it under its row lock
    in this same transaction; the service then writes from it instead of locking and reading it again (the
    workflow engine's batches lock their contacts first, one statement for all).

    Fields and `consent` are one change: one transaction writes both and records each consent change
    (ConsentChange) before `contact.updated` is published, so a workflow that event starts sees the new
    consent (an unsubscribe sent with a profile edit is never followed by an email). Input is checked
    before any write, so a bad value stores no part and leaves a caller's transaction usable (the
    workflow engine records it as the step's failure).
    """
    phone_error = _check_fields(fields, stored_phone_may_stay=True)
    _check_values(fields)
    opt_outs = _check_consent(consent, consent_source)
    store = ContactStore()
    duplicate_email = False
    with transaction.atomic(savepoint=False):  # on the hot path of update steps: no savepoint round trips
        row = dict(locked_row) if locked_row is not None else store.lock(contact_id)
        refused = phone_error if phone_error is not None and row["phone"] != fields["phone"] else None
        changes: dict[str, Any] = {}
        for name, value in fields.items():
            if name == "custom_fields":
                value = {**row["custom_fields"], **value} if merge_custom_fields else dict(value)
            if row[name] != value:
                changes[name] = value
        consent_changes = {name: value for name, value in opt_outs.items() if row[name] != value}
        if refused is None and ("email" in changes or "phone" in changes):
            try:  # a change that would leave the contact with no address at all
                check_reachable(changes.get("email", row["email"]), changes.get("phone", row["phone"]))
            except ContactError as error:
                refused = error
        if refused is not None:
            pass  # raised below, outside the block: raising inside would doom a caller's transaction
        elif changes.get("email") and store.email_taken(row["account_id"], changes["email"], contact_id):
            duplicate_email = True
        elif changes or consent_changes:
            update_data = _updated_event_data(changes, before=row["custom_fields"])
            row.update(changes, **consent_changes, updated_at=store.update(contact_id, {**changes, **consent_changes}))
            _record_consent(contact_id, consent_changes, consent_source)
            if changes:  # consent alone publishes nothing, as an unsubscribe link or a STOP does not
                events.publish(events.ContactEvent(row["account_id"], contact_id, events.CONTACT_UPDATED, update_data))
    if refused is not None:
        raise refused
    if duplicate_email:
        raise ContactError("email", "another contact in this account has this email address")
    return as_contact(row)


def _updated_event_data(changes: Mapping[str, Any], *, before: Mapping[str, Any] | None) -> dict[str, Any]:
    """`contact.updated`'s data: the fields that changed and, when custom fields did, which of them
    (`changed_custom_fields`), so a workflow waiting for one custom field is not woken by another."""
    data: dict[str, Any] = {"changed": list(changes)}
    if "custom_fields" in changes:
        data["changed_custom_fields"] = changed_custom_fields(before or {}, changes["custom_fields"])
    return data


def _check_values(fields: dict[str, Any]) -> None:
    """Each value against its model field's own rules (email format, length), before any write."""
    for name, value in fields.items():
        if name == "custom_fields":
            continue
        try:
            cast(models.Field, Contact._meta.get_field(name)).run_validators(value)
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


def _check_consent(consent: Mapping[ConsentChannel, bool] | None, source: ConsentSource | None) -> dict[str, bool]:
    """The opt-outs asked for, by contact column; checked before any write so a bad one stores nothing."""
    if not consent:
        return {}
    if source is None:
        raise ValueError("a consent change needs its source")
    ConsentSource(source)
    opt_outs: dict[str, bool] = {}
    for channel, opted_out in consent.items():
        try:
            name = CONSENT_FIELDS[ConsentChannel(channel)]
        except ValueError:
            raise ContactError("consent", f"{channel!r} is not a consent channel") from None
        if not isinstance(opted_out, bool):
            raise ContactError(name, "must be true or false")
        opt_outs[name] = opted_out
    return opt_outs


def _record_consent(
    contact_id: int, changes: Mapping[str, bool], source: ConsentSource | None, detail: str = ""
) -> None:
    """One ConsentChange per changed channel: every change of consent is kept with when and how it happened."""
    channels = {name: channel for channel, name in CONSENT_FIELDS.items()}
    if changes:
        if source is None:  # _check_consent refuses a consent change without its source, before any write
            raise ValueError("a consent change needs its source")
        ConsentChange.objects.bulk_create(
            ConsentChange(
                contact_id=contact_id, channel=channels[name], opted_out=value, source=source, detail=detail[:200]
            )
            for name, value in changes.items()
        )


@transaction.atomic
def contact_delete(*, contact_id: int) -> None:
    """Delete a contact and its consent history. `contact.deleted` is published first, in the same
    transaction, so subscribers (the workflow engine) can stop what runs for it.

    Locks are taken in the order every path takes them (docs/decisions/lock-order.md): the rows that reference
    the contact (its runs) first, then the contact. A step holds its run's lock when it changes the
    contact; locking the contact first and then deleting that run would deadlock with it.
    """
    contact = ContactStore().lock_for_delete(contact_id)
    events.publish(events.ContactEvent(contact.account_id, contact.pk, events.CONTACT_DELETED, {}))
    contact.delete()


def contact_add_tag(*, contact_id: int, tag: str) -> tuple[Contact, bool]:
    """Tag a contact; a contact that has MAX_TAGS tags already is refused (ContactError naming `tag`)."""
    tag = normalize_tag(tag)  # before any write: a bad tag leaves a caller's transaction usable
    store = ContactStore()
    with transaction.atomic(savepoint=False):  # on the hot path of tag steps: no savepoint round trips
        row, added = store.add_tag(contact_id, tag)
        if added:
            events.publish(events.ContactEvent(row["account_id"], contact_id, events.TAG_ADDED, {"tag": tag}))
    if not added and tags_full(row["tags"], tag):
        raise too_many_tags("tag")  # raised here, not in the block: it would doom a caller's transaction
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
    """Record a consent change; repeating the current state changes nothing and records nothing.

    The row lock is FOR NO KEY UPDATE: it serializes consent writers without blocking the inserts of
    rows that reference the contact (runs, consent records), which take FOR KEY SHARE on it.
    """
    ((field, _),) = _check_consent({channel: opted_out}, source).items()
    contact = Contact.objects.select_for_update(no_key=True).get(pk=contact_id)
    if getattr(contact, field) == opted_out:
        return contact, False
    setattr(contact, field, opted_out)
    contact.save(update_fields=[field, "updated_at"])
    _record_consent(contact.pk, {field: opted_out}, source, detail)
    return contact, True
