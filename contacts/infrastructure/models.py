"""The CRM side: contacts, their consent history and the events recorded on them."""

import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from contacts.domain.clock import normalize_time_zone
from contacts.domain.model import ConsentChannel, ConsentSource, ConsentState, ContactError


def validate_contact_time_zone(value: str) -> None:
    """Blank, or an IANA time zone name zoneinfo knows."""
    try:
        normalize_time_zone(value)
    except ContactError as error:
        raise ValidationError(error.reason) from None


class Contact(models.Model):
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="contacts")
    email = models.EmailField(blank=True, default="")
    phone = models.CharField(max_length=32, blank=True, default="")  # E.164, e.g. +15551234567
    first_name = models.CharField(max_length=150, blank=True, default="")
    last_name = models.CharField(max_length=150, blank=True, default="")
    # The contact's own clock (IANA name); blank: derived from the phone number, else the account's
    # (contacts.domain.clock.resolve_time_zone).
    time_zone = models.CharField(
        max_length=64, blank=True, default="", db_default="", validators=[validate_contact_time_zone]
    )
    custom_fields = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=list, blank=True)  # normalized by contacts.domain.normalize_tag
    unsubscribed = models.BooleanField(default=False)  # no marketing email
    sms_opted_out = models.BooleanField(default=False)  # no SMS and no voice calls
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "contacts"
        ordering = ["-created_at", "-id"]
        # Downloading a list of contacts: more than seeing them (view-only staff may not), see contacts.admin.
        permissions = [("export_contact", "Can export contacts")]
        constraints = [
            # One contact per email address within an account, as CRMs dedupe.
            models.UniqueConstraint(fields=["account", "email"], condition=~Q(email=""), name="contact_unique_email"),
        ]
        indexes = [
            models.Index(fields=["account", "phone"], name="contact_account_phone"),
            # An inbound STOP names only the phone number: it opts the number out in every account.
            models.Index(fields=["phone"], name="contact_phone"),
        ]

    def __str__(self) -> str:
        return self.email or self.phone or f"contact {self.pk}"

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.last_name}".strip()

    def consent(self) -> ConsentState:
        return ConsentState(unsubscribed=self.unsubscribed, sms_opted_out=self.sms_opted_out)


class Event(models.Model):
    """Something that happened to a contact outside its own fields: an email opened or clicked, an SMS reply,
    a custom event an API client posted. (A contact's own changes, tag.added and contact.updated, are its
    history in its row and are not stored here.) `dedup_key` names an occurrence that counts once: an email's
    open or one link's click per run and step; a second one is not a new event."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    contact = models.ForeignKey(Contact, on_delete=models.CASCADE, related_name="events")
    name = models.CharField(max_length=100)
    data = models.JSONField(default=dict, blank=True)
    dedup_key = models.CharField(max_length=64, blank=True, default="")  # sha256 hex, or ""
    occurred_at = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "contacts"
        ordering = ["-occurred_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["contact", "name", "dedup_key"], condition=~Q(dedup_key=""), name="contact_event_once"
            ),
        ]
        indexes = [models.Index(fields=["contact", "name", "occurred_at"], name="contact_event_by_name")]

    def __str__(self) -> str:
        return f"{self.name} on contact {self.contact_id}"


class ConsentChange(models.Model):
    """Every change of consent, with when and how it happened (proof for regulators)."""

    contact = models.ForeignKey(Contact, on_delete=models.CASCADE, related_name="consent_changes")
    channel = models.CharField(max_length=10, choices=[(c.value, c.value) for c in ConsentChannel])
    opted_out = models.BooleanField()
    source = models.CharField(max_length=30, choices=[(s.value, s.value) for s in ConsentSource])
    detail = models.CharField(max_length=200, blank=True, default="")  # e.g. the keyword received
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "contacts"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.channel} {'opt-out' if self.opted_out else 'opt-in'} via {self.source}"


class ContactImport(models.Model):
    """A spreadsheet of contacts on its way in: uploaded, mapped, checked, then imported whole or not at all."""

    class Status(models.TextChoices):
        UPLOADED = "uploaded", "waiting for its columns to be mapped"
        QUEUED = "queued", "queued"
        CHECKING = "checking", "being checked"
        CHECKED = "checked", "checked: ready to import"
        REFUSED = "refused", "refused: nothing was imported"
        IMPORTED = "imported", "imported"

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    filename = models.CharField(max_length=255)
    content = models.BinaryField()  # the file as uploaded; emptied once imported
    header = models.JSONField(default=list)
    sample = models.JSONField(default=list)  # the first rows, for the mapping page
    row_count = models.PositiveIntegerField(default=0)
    mapping = models.JSONField(default=list)  # one target per column (contacts.domain.imports)
    options = models.JSONField(default=dict)  # existing: update|skip, tag, then: [job specs]
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.UPLOADED)
    problems = models.JSONField(default=list)  # [{"row", "column", "message"}], the first ones
    problem_count = models.PositiveIntegerField(default=0)
    created_count = models.PositiveIntegerField(default=0)
    updated_count = models.PositiveIntegerField(default=0)
    skipped_count = models.PositiveIntegerField(default=0)
    contact_ids = models.JSONField(default=list)  # the contacts it created or updated, for what follows
    follow_up = models.CharField(max_length=500, blank=True, default="")  # what follows says how it goes
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "contacts"
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"import of {self.filename}"
