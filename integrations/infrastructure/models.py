"""Integrations' tables: each account's webhook signing secret, inbound SMS ids, SMS conversations, and the
account's sending settings (send windows, frequency caps)."""

from collections.abc import Callable

from django.core.exceptions import ValidationError
from django.db import models

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
        return f"sending settings of account {self.account_id}"

    def as_document(self) -> dict[str, object]:
        """The settings as `parse_account_settings` reads them."""
        return {
            "send_windows": self.send_windows,
            "frequency_caps": self.frequency_caps,
            "when_capped": self.when_capped,
        }
