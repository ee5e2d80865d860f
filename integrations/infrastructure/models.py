"""Integrations' tables: each account's webhook signing secret, inbound SMS ids, SMS conversations, the
account's sending settings (send windows, frequency caps), and the ledger of every message sent."""

from collections.abc import Callable

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Now

from integrations.domain.sending.problems import Problems
from integrations.domain.sending.settings import parse_account_settings
from integrations.domain.signing import mask_secret


class WebhookSigningSecret(models.Model):
    """The `whsec_` secret that signs an account's webhooks (Standard Webhooks v1).

    Created the first time the account sends a webhook (or from the admin or
    `manage.py webhook_secret`). After a rotation the previous secret keeps
    signing beside the new one for WEBHOOK_SECRET_ROTATION_GRACE_HOURS, so
    receivers can switch without losing a message. The value never appears in
    a repr, a log line or the admin list; only `manage.py webhook_secret`
    prints it, for the operator to hand to the receiver.
    """

    account = models.OneToOneField("accounts.Account", on_delete=models.CASCADE, related_name="webhook_signing_secret")
    secret = models.CharField(max_length=128)
    previous_secret = models.CharField(max_length=128, blank=True, default="")
    rotated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "integrations"
        verbose_name = "webhook signing secret"

    def __str__(self) -> str:
        return f"webhook signing secret {mask_secret(self.secret)} of account {self.account_id}"

    def __repr__(self) -> str:
        return f"<WebhookSigningSecret account={self.account_id} {mask_secret(self.secret)}>"


class InboundSmsMessage(models.Model):
    """The provider's id of every message received (a consent keyword or a reply), so a replayed request
    changes nothing and a retried reply counts once.

    A provider's signature carries no timestamp: a captured, correctly signed START could otherwise
    be sent again after the person's STOP and opt them back in. Providers also retry a webhook that
    timed out, with the same id.
    """

    message_sid = models.CharField(max_length=64, unique=True)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "integrations"

    def __str__(self) -> str:
        return self.message_sid


class SmsConversation(models.Model):
    """The last SMS Relay sent a contact from one number: the conversation a reply from that phone answers.

    One row per contact and sending number, moved forward by every SMS sent (an upsert), so finding whose
    reply an inbound message is stays one indexed read however much was sent. Deleted with the contact.
    """

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    contact = models.ForeignKey("contacts.Contact", on_delete=models.CASCADE, related_name="+")
    from_number = models.CharField(max_length=32)  # the number Relay sent from (E.164)
    to_number = models.CharField(max_length=32)  # the number it sent to: the contact's phone then
    last_sent_at = models.DateTimeField()
    last_message_id = models.CharField(max_length=64, blank=True, default="")  # the provider's sid

    class Meta:
        app_label = "integrations"
        constraints = [
            models.UniqueConstraint(fields=["contact", "from_number"], name="sms_conversation_once"),
        ]
        indexes = [models.Index(fields=["to_number", "from_number"], name="sms_conversation_by_phone")]

    def __str__(self) -> str:
        return f"SMS conversation of contact {self.contact_id} from {self.from_number}"


def _problems_as_error(check: Callable[[Problems], object]) -> None:
    problems = Problems()
    check(problems)
    if problems:
        raise ValidationError([str(problem) for problem in problems])


def validate_send_windows(value: object) -> None:
    _problems_as_error(lambda problems: parse_account_settings({"send_windows": value}, "", problems))


def validate_frequency_caps(value: object) -> None:
    _problems_as_error(lambda problems: parse_account_settings({"frequency_caps": value}, "", problems))


class SendingSettings(models.Model):
    """An account's sending rules (integrations.domain.sending.settings): a send window per channel, the
    frequency caps, and what happens to a message over a cap. An account without this row, or a channel not
    in `send_windows`, has the built-in default: the US federal window for marketing SMS and calls, none for
    email. A workflow and a step may override each (Workflow.sending_rules, a send step's config)."""

    class WhenCapped(models.TextChoices):
        DEFER = "defer", "wait until the contact is under the cap again"
        SKIP = "skip", "skip the message"

    account = models.OneToOneField("accounts.Account", on_delete=models.CASCADE, related_name="sending_settings")
    # {"sms": "us_fl", "voice": null, "email": {"days": ["mon-fri"], "hours": ["09:00-20:00"]}}: a preset's
    # name, a window, or null (none); a channel left out keeps the built-in default.
    send_windows = models.JSONField(default=dict, blank=True, validators=[validate_send_windows])
    # [{"max": 3, "days": 1}, {"max": 1, "hours": 24, "channel": "sms"}]
    frequency_caps = models.JSONField(default=list, blank=True, validators=[validate_frequency_caps])
    when_capped = models.CharField(max_length=8, choices=WhenCapped.choices, default=WhenCapped.DEFER)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "integrations"
        verbose_name = "sending settings"
        verbose_name_plural = "sending settings"

    def __str__(self) -> str:
        return f"sending settings of {self.account}"

    def as_document(self) -> dict[str, object]:
        """The settings as `parse_account_settings` reads them."""
        return {
            "send_windows": self.send_windows,
            "frequency_caps": self.frequency_caps,
            "when_capped": self.when_capped,
        }


class OutboundMessage(models.Model):
    """The ledger: one row per message Relay sends (an email, an SMS, a call), whatever sent it.

    Written by the door (`integrations.application.outbound.send_message`) and nothing else, BEFORE the
    provider is called (status `sending`, committed), keyed by an idempotency key that every retry of the same
    job or step repeats: a retry finds the row and never sends a `sent` message again. It is what the frequency
    caps count (`sending_at`), what reports and tracking read, and what says why a message did not go (deferred
    until when, refused why). Every time in it is the database's clock; `history` keeps each status it went
    through, `{"status", "at", "detail"}`, in order. docs/decisions/the-door-and-the-ledger.md.
    """

    class Status(models.TextChoices):
        SENDING = "sending", "sending (written before the provider call; its outcome not yet known)"
        SENT = "sent", "sent (the provider accepted it)"
        FAILED = "failed", "failed (the provider refused it, or the call failed; a retry may send it)"
        DEFERRED = "deferred", "deferred (a send window or a frequency cap: asked again later)"
        REFUSED = "refused", "refused (consent, no address, suppression, a cap set to skip)"

    class Channel(models.TextChoices):
        EMAIL = "email", "email"
        SMS = "sms", "SMS"
        VOICE = "voice", "voice call"

    class Purpose(models.TextChoices):
        MARKETING = "marketing", "marketing"
        TRANSACTIONAL = "transactional", "transactional"
        TEST = "test", "test (the builder's send a test: no rule applies)"

    # No account: an operator's email queued without one (a send_email job). Deleted with the account.
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, null=True, related_name="+", db_index=False
    )
    # No contact: a bare address (a send_email job to a stranger, a test send to a typed address). A contact's
    # messages are deleted with it (personal data, as its events are).
    contact = models.ForeignKey(
        "contacts.Contact", on_delete=models.CASCADE, null=True, related_name="+", db_index=False
    )
    channel = models.CharField(max_length=8, choices=Channel.choices)
    purpose = models.CharField(max_length=16, choices=Purpose.choices)
    address = models.CharField(max_length=320, blank=True, default="")  # the email address or number it went to
    # The same on every attempt of one message (a job's id, a run's step visit): a retry finds this row.
    idempotency_key = models.CharField(max_length=255, unique=True)
    # Where it came from. Plain ids, no foreign keys: workflows depends on integrations, never the reverse.
    workflow_id = models.BigIntegerField(null=True, blank=True)
    version_id = models.UUIDField(null=True, blank=True)
    run_id = models.UUIDField(null=True, blank=True)
    step_key = models.CharField(max_length=100, blank=True, default="")
    split_path = models.CharField(max_length=100, blank=True, default="")  # the split path the run took, if any
    job_id = models.UUIDField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices)
    history = models.JSONField(default=list, blank=True)
    provider = models.CharField(max_length=32, blank=True, default="")  # smtp, twilio, console ...
    # The email's Message-ID (derived from the idempotency key: the same on a resend), Twilio's sid ...
    provider_message_id = models.CharField(max_length=255, blank=True, default="")
    provider_calls = models.PositiveIntegerField(default=0)  # more than 1: resent after an unknown outcome
    rule = models.CharField(max_length=32, blank=True, default="")  # the rule that deferred or refused it
    code = models.CharField(max_length=32, blank=True, default="")  # a refusal's stable code (unsubscribed ...)
    reason = models.TextField(blank=True, default="")  # a deferral's or refusal's reason, in a marketer's words
    deferred_until = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=1000, blank=True, default="")  # the last failure, as the queue stores it
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())
    # When the door let it go (status sending): what the frequency caps count from.
    sending_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)  # when the provider accepted it

    class Meta:
        app_label = "integrations"
        db_table = "integrations_outbound_message"
        verbose_name = "outbound message"
        indexes = [
            # "This contact's messages in the last N hours": the frequency caps' count, a contact's page, and the
            # cascade when a contact is deleted. A contact's id names its account: the count also says which.
            models.Index(fields=["contact", "sending_at"], name="outbound_contact_recent"),
            # An account's messages, newest first (the admin's list); the cascade when an account is deleted.
            models.Index(fields=["account", "created_at"], name="outbound_account_created"),
            # "This step's messages": a workflow's statistics per step.
            models.Index(fields=["workflow_id", "step_key"], name="outbound_step"),
        ]

    def __str__(self) -> str:
        return f"{self.channel} {self.idempotency_key} ({self.status})"
