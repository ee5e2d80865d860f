"""Tenants and membership."""

from email.utils import parseaddr
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, validate_email
from django.db import models
from django.db.models.functions import Now

from accounts.domain.limits import DEFAULT_MAX_CONCURRENT_JOBS
from accounts.domain.roles import Role


def validate_from_email(value: str) -> None:
    """`addr@example.com` or `Name <addr@example.com>`, on one line."""
    if "\n" in value or "\r" in value:
        raise ValidationError("must be on one line")
    _, address = parseaddr(value)
    if not address:
        raise ValidationError("must be an email address, optionally with a name: Name <addr@example.com>")
    validate_email(address)


def validate_time_zone(value: str) -> None:
    """An IANA time zone name (Europe/Paris, America/New_York, UTC)."""
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError("must be a time zone name such as Europe/Paris or America/New_York") from None


def time_zone_choices() -> list[tuple[str, str]]:
    return [(name, name.replace("_", " ")) for name in sorted(available_timezones())]


class Account(models.Model):
    """A tenant. Every contact, workflow, run and job belongs to one."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    # Runs QUEUED or ACTIVE at once; the next start raises ConcurrentExecutionLimitError.
    max_concurrent_executions = models.PositiveIntegerField(default=100)
    # Jobs running at once across all workers; the claim skips the account beyond it.
    max_concurrent_jobs = models.PositiveIntegerField(
        default=DEFAULT_MAX_CONCURRENT_JOBS, validators=[MinValueValidator(1)]
    )
    # The From of this account's email; blank: DEFAULT_FROM_EMAIL.
    from_email = models.CharField(
        max_length=254,
        blank=True,
        default="",
        validators=[validate_from_email],
        help_text="Sender of this account's email, e.g. Acme <news@acme.example>. Blank: the site default.",
    )
    # Where the account's marketers live: the admin shows times and reads dates (a wait "until") in it.
    time_zone = models.CharField(
        max_length=64,
        default="UTC",
        validators=[validate_time_zone],
        help_text="The account's time zone, e.g. Europe/Paris: dates in the workflow builder are read in it.",
    )
    # Opens and clicks of this account's email become events (a signed pixel, links through /t/...); a
    # workflow may say otherwise for its own email (Workflow.track_email_engagement).
    track_email_engagement = models.BooleanField(
        default=True,
        help_text="Track opens and clicks of email (a pixel, links through Relay). A workflow may say otherwise.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "accounts"
        ordering = ["name"]
        constraints = [
            # 0 would never let the account's jobs run, and would block the claim's lane for everyone.
            models.CheckConstraint(condition=models.Q(max_concurrent_jobs__gte=1), name="account_runs_a_job"),
        ]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user's role in one account."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=[(r.value, r.name.title()) for r in Role])
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "accounts"
        constraints = [
            models.UniqueConstraint(fields=["account", "user"], name="membership_unique_user"),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.role}) in {self.account}"


class ApiToken(models.Model):
    """A bearer token for the REST API: a user acting for one account.

    Only the SHA-256 of the secret is stored (accounts.domain.tokens). A token
    without an account is an operator token and belongs to a superuser; it
    reaches the operator endpoints only.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    account = models.ForeignKey(Account, null=True, blank=True, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, default="")
    prefix = models.CharField(max_length=16, db_index=True)  # shown to tell tokens apart; not secret
    key_hash = models.CharField(max_length=64, unique=True)  # hex SHA-256 of the secret
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)  # refreshed at most once a minute
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "accounts"
        ordering = ["-created_at", "-id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class AuditEvent(models.Model):
    """Something done in an account that its owners (and regulators) must be able to look back on: who, when,
    what, and its figures. Written once by `accounts.application.audit`, never changed; the admin shows it
    read-only. Deleting the account deletes its events; deleting the user keeps them, with `actor_name`."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="audit_events")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    actor_name = models.CharField(max_length=150, blank=True, default="")  # the username when it happened
    action = models.CharField(max_length=64)  # accounts.domain.audit.AuditAction, e.g. "contacts.exported"
    detail = models.JSONField(default=dict, blank=True)  # e.g. {"rows": 1200, "format": "csv"}
    created_at = models.DateTimeField(db_default=Now(), editable=False)  # the database's clock

    class Meta:
        app_label = "accounts"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["account", "-created_at"], name="auditevent_account_time")]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_name or 'someone'} in account {self.account_id}"
