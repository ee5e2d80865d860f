from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from accounts.application import queue_limits

        queue_limits.connect()  # the queue's copy of each account's limit, and deletes reaching its jobs
