from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Tenancy: a leaf that imports no other app. The queue listens to its accounts (jobs.application.tenancy)."""

    name = "accounts"
    verbose_name = "Accounts"
