"""Tenants and membership."""

from django.conf import settings
from django.db import models

from accounts.domain.roles import Role


class Account(models.Model):
    """A tenant. Every contact, workflow, run and job belongs to one."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    # Runs QUEUED or ACTIVE at once; the next start raises ConcurrentExecutionLimitError.
    max_concurrent_executions = models.PositiveIntegerField(default=100)
    # Jobs running at once across all workers; the claim skips the account beyond it.
    max_concurrent_jobs = models.PositiveIntegerField(default=10)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "accounts"
        ordering = ["name"]

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
