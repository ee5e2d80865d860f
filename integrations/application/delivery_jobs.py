"""Deliveries any Django code can queue, without a workflow: a signed webhook and an email.

    enqueue("webhook_delivery", {"url": "https://hooks.example.com/orders", "method": "POST",
                                 "headers": {"X-Shop": "7"}, "body": {"order": 42}, "account": account.pk})
    enqueue("send_email", {"to": "ada@example.com", "subject": "Your order", "text": "Thanks!",
                           "html": "<p>Thanks!</p>", "account": account.pk, "from": "Shop <shop@example.com>"})

Each runs through the same channel as the workflow steps (integrations.application.channels): the webhook is
signed with the account's Standard Webhooks secret and goes through the SSRF guard; an email goes through
EMAIL_URL. A failure raises the channel's classified error, so the queue retries exactly what a workflow step
would retry (timeouts, 429 with its Retry-After, 5xx, network) and fails at once what it would not (4xx,
401/403, a refused target), and the stored error follows the queue's rule (origin and code, never a path).
Payloads are checked at enqueue (a missing or mistyped key is refused there, naming it).
"""

from __future__ import annotations

import logging
from typing import Any

from contacts.application.selectors import Recipient, recipient
from integrations.application.channels import webhook_client
from integrations.application.outbound import Deferred, Origin, Refused, send_message
from integrations.domain.channels import EmailMessage, WebhookRequest
from integrations.domain.sending import Purpose
from jobs.public.handlers import MAX_SNOOZE_SECONDS, InvalidPayload, JobContext, job_handler, payload_check, require
from kernel import clock

log = logging.getLogger("relay.integrations")

WEBHOOK_DELIVERY = "webhook_delivery"
SEND_EMAIL = "send_email"
WEBHOOK_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


_Spec = dict[str, tuple[type | tuple[type, ...], bool]]  # key -> (type, required)


def _problems(payload: dict[str, Any], spec: _Spec) -> dict[str, str]:
    """Each key of `spec` ((type, required)) checked; unknown keys refused, so a misspelt key is not ignored."""
    problems = {}
    for key in payload:
        if key not in spec:
            problems[key] = f"is not a field of this job (fields: {', '.join(spec)})"
    for key, (kind, required) in spec.items():
        try:
            require(payload, key, kind, optional=not required)
        except InvalidPayload as exc:
            problems[key] = str(exc).split(": ", 1)[1]
    return problems


_WEBHOOK: _Spec = {
    "url": (str, True),
    "method": (str, False),
    "headers": (dict, False),
    "body": (object, False),
    "account": (int, False),
}


@payload_check(WEBHOOK_DELIVERY)
def check_webhook_payload(payload: dict[str, Any]) -> dict[str, str]:
    problems = _problems(payload, _WEBHOOK)
    url = payload.get("url")
    if isinstance(url, str) and not url.lower().startswith(("http://", "https://")):
        problems["url"] = "must be an http:// or https:// URL"
    method = payload.get("method")
    if isinstance(method, str) and method.upper() not in WEBHOOK_METHODS:
        problems["method"] = f"must be one of {', '.join(WEBHOOK_METHODS)}"
    headers = payload.get("headers")
    if isinstance(headers, dict) and not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        problems["headers"] = "must map header names to text values"
    return problems


@job_handler(WEBHOOK_DELIVERY)
def webhook_delivery(payload: dict[str, Any], job: JobContext) -> dict[str, Any]:
    """One attempt of a signed, SSRF-guarded webhook. The `webhook-id` is the job's, the same on every retry of
    this job, so a receiver can drop duplicates; a new job is a new message."""
    account_id = _account(payload, job)
    response = webhook_client().send(
        WebhookRequest(
            method=str(payload.get("method") or "POST").upper(),
            url=require(payload, "url", str),
            headers=dict(payload.get("headers") or {}),
            body=payload.get("body"),
            message_id=f"job_{job.id}",
            account_id=account_id,
        )
    )
    return response.as_response_data()


_EMAIL: _Spec = {
    "to": (str, True),
    "subject": (str, True),
    "text": (str, True),
    "html": (str, False),
    "from": (str, False),
    "account": (int, False),
    "contact": (int, False),
    "purpose": (str, False),
}
EMAIL_PURPOSES = (Purpose.MARKETING.value, Purpose.TRANSACTIONAL.value)


@payload_check(SEND_EMAIL)
def check_email_payload(payload: dict[str, Any]) -> dict[str, str]:
    problems = _problems(payload, _EMAIL)
    if payload.get("contact") is not None and payload.get("account") is None:
        problems["account"] = "is required with contact (a contact belongs to an account)"
    purpose = payload.get("purpose")
    if isinstance(purpose, str) and purpose not in EMAIL_PURPOSES:
        problems["purpose"] = f"must be one of {', '.join(EMAIL_PURPOSES)}"
    return problems


@job_handler(SEND_EMAIL)
def send_email(payload: dict[str, Any], job: JobContext) -> dict[str, Any]:
    """One email through EMAIL_URL, by the door (integrations.application.outbound): its ledger row is the
    job's (key `job_<id>`, the same on every retry, and the email's Message-ID is made from it), so a retry
    after a crash never sends an email the ledger knows was sent. When the recipient is a contact of the
    account (named by `contact`, or found by the address), the sending rules apply: consent is law (an
    unsubscribed contact gets no marketing email: the job completes as skipped, its result saying so and
    why), windows and caps defer it, and the email carries the contact's unsubscribe link and headers.
    `purpose` is marketing unless the payload says transactional (a receipt reaches an unsubscribed contact)."""
    account_id = _account(payload, job)
    to = require(payload, "to", str)
    contact = _recipient(account_id, payload.get("contact"), to)
    purpose = Purpose(payload["purpose"]) if payload.get("purpose") else None
    outcome = send_message(
        key=f"job_{job.id}",
        content=EmailMessage(
            to=to,
            subject=require(payload, "subject", str),
            text=require(payload, "text", str),
            html=payload.get("html"),
            from_email=payload.get("from") or None,
        ),
        account_id=account_id,
        contact_id=contact.contact_id if contact is not None else None,
        purpose=purpose,
        origin=Origin(job_id=job.id),
    )
    if isinstance(outcome, Refused):
        log.info("send_email job %s skipped: %s", job.id, outcome.reason)
        # Kept with the job (Job.result): it completed, and this says nothing was sent, and why.
        skipped: dict[str, Any] = {"skipped": outcome.code, "reason": outcome.reason}
        if contact is not None:
            skipped["contact"] = contact.contact_id
        job.keep_result(skipped)
        return skipped
    if isinstance(outcome, Deferred):
        # Not a failure and not an attempt: the job snoozes until the rules let the email go (a window's opening,
        # the moment the contact is under a cap), its attempts untouched (docs/decisions/deferral-and-snooze.md).
        job.snooze(min(outcome.seconds_after(clock.now()), MAX_SNOOZE_SECONDS), outcome.reason)
    return outcome.result.as_response_data()


def _account(payload: dict[str, Any], job: JobContext) -> int | None:
    account = require(payload, "account", int, optional=True)
    if account is not None and job.account_id is not None and account != job.account_id:
        raise InvalidPayload("account", "differs from the account the job was queued for")
    return account if account is not None else job.account_id


def _recipient(account_id: int | None, contact_id: int | None, address: str) -> Recipient | None:
    if account_id is None:
        return None
    if contact_id is not None:
        found = recipient(account_id=account_id, contact_id=contact_id)
        if found is None:
            raise InvalidPayload("contact", "is not a contact of this account")
        return found
    return recipient(account_id=account_id, email=address)
