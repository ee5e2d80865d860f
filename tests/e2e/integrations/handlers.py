"""Job handlers the end-to-end tests queue: each sends through a channel factory, as the workflow engine will.

Loaded by the worker process through JOB_HANDLER_MODULES, and by the test process on import.
"""

from typing import Any

from integrations.application.channels import email_channel, sms_channel, webhook_client
from integrations.domain.channels import EmailMessage, WebhookRequest
from jobs.application.context import JobContext
from jobs.application.registry import job_handler


@job_handler("integrations_e2e.webhook")
def deliver_webhook(payload: dict[str, Any], job: JobContext) -> None:
    webhook_client().send(
        WebhookRequest(
            "POST",
            payload["url"],
            headers=payload.get("headers", {}),
            body=payload["body"],
            message_id=f"job-{job.id}",  # stable across the job's retries, as a run's step id is
            account_id=job.account_id,
        )
    )


@job_handler("integrations_e2e.email")
def send_email(payload: dict[str, Any], job: JobContext) -> None:
    email_channel().send_email(
        EmailMessage(
            to=payload["to"],
            subject=payload["subject"],
            text=payload["text"],
            html=payload.get("html"),
            account_id=job.account_id,
            contact_id=payload["contact_id"],
        )
    )


@job_handler("integrations_e2e.sms")
def send_sms(payload: dict[str, Any], job: JobContext) -> None:
    sms_channel().send_sms(to=payload["to"], body=payload["body"], account_id=job.account_id)
