"""The remembered answers of requests sent with an Idempotency-Key."""

from django.db import models


class IdempotencyRecord(models.Model):
    """One key of one account: the request it was first used with (by fingerprint) and the answer given.

    Written in the transaction that did the work, so a record exists if and
    only if the work was committed. Past `expires_at` the key is forgotten
    (the `idempotency.purge` job deletes it; a lookup ignores and replaces it).
    """

    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+", db_index=False)
    key = models.CharField(max_length=200)
    fingerprint = models.CharField(max_length=64)  # SHA-256 hex of method, path and canonical JSON body
    status_code = models.PositiveSmallIntegerField()
    body = models.TextField()  # the JSON exactly as first sent: a replay is byte-identical
    headers = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        app_label = "idempotency"
        constraints = [models.UniqueConstraint(fields=["account", "key"], name="idempotency_account_key")]

    def __str__(self) -> str:
        return f"{self.key} ({self.status_code})"
