"""Send the email through the door (integrations.application.outbound: the sending rules, the ledger), skipped
when the contact unsubscribed or has no address, deferred by a send window or a frequency cap; tracked when the
workflow tracks engagement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from django.core.validators import validate_email

from integrations.domain.channels import DeliveryResult, EmailMessage
from integrations.domain.tracking import EmailTracking
from workflows.application.actions import ActionResult, StepRun, send_through_the_door
from workflows.application.engagement import email_tracking_enabled, step_key
from workflows.application.previews import PreviewRefused, StepPreview, sanitised_html, send_test_message
from workflows.domain.workflow import Step
from workflows.infrastructure.templates import renderer
from workflows.steps.send_email.config import SendEmailConfig


class SendEmail:
    action_type = "send_email"
    external = True

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(SendEmailConfig, run.step.config)
        subject = " ".join(run.text(config.subject, "subject").split())  # one line, always
        message = EmailMessage(
            to=run.contact["email"] or "",
            subject=subject,
            text=run.text(config.text, "text"),
            html=run.html(config.html, "html") if config.html else None,
            account_id=run.account_id,
            contact_id=run.contact_id,
            headers={"X-Relay-Run": str(run.execution_id)},
            tracking=(
                EmailTracking(run_id=str(run.execution_id), step_key=step_key(run.step))
                if email_tracking_enabled(run.workflow_id)
                else None
            ),
        )
        return send_through_the_door(run, message, config.sending)

    # --- the builder's preview and test send ---------------------------------------------------
    def render(self, step: Step, label: str, context: Mapping[str, Any]) -> StepPreview:
        config = cast(SendEmailConfig, step.config)
        html = renderer.render_html(config.html, context) if config.html else ""
        return StepPreview(
            step.action_type,
            label,
            shape="email",
            subject=" ".join(renderer.render_text(config.subject, context).split()),
            text=renderer.render_text(config.text, context),
            html=sanitised_html(html) if html else "",
        )

    def send_test(
        self, preview: StepPreview, to: str, account_id: int, workflow_id: int | None = None
    ) -> DeliveryResult:
        try:
            validate_email(to)
        except Exception:
            raise PreviewRefused("Type the email address to send the test to.") from None
        message = EmailMessage(
            to=to,
            subject=f"[Test] {preview.subject}",
            text=preview.text,
            html=preview.html or None,
            headers={"X-Relay-Test": "1"},
        )
        return send_test_message(message, account_id=account_id, workflow_id=workflow_id)


EXECUTOR = SendEmail()
PREVIEW = EXECUTOR
