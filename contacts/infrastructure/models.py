"""The CRM side: contacts and their consent history."""

from django.db import models
from django.db.models import Q

from contacts.domain.model import ConsentChannel, ConsentSource, ConsentState


class Contact(models.Model):
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="contacts")
    email = models.EmailField(blank=True, default="")
    phone = models.CharField(max_length=32, blank=True, default="")  # E.164, e.g. +15551234567
    first_name = models.CharField(max_length=150, blank=True, default="")
    last_name = models.CharField(max_length=150, blank=True, default="")
    custom_fields = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=list, blank=True)  # normalized by contacts.domain.normalize_tag
    unsubscribed = models.BooleanField(default=False)  # no marketing email
    sms_opted_out = models.BooleanField(default=False)  # no SMS and no voice calls
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "contacts"
        ordering = ["-created_at", "-id"]
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
