"""Send the request through Relay's signed, SSRF-guarded webhook client (integrations); the answer is kept twice:
redacted for the step's log row, as it came for later conditions and templates."""

from __future__ import annotations

import contextlib
import json
from typing import Any, cast

from integrations.application import channels
from integrations.domain.channels import WebhookRequest
from kernel.failures import ValidationFailure
from workflows.application.actions import ActionResult, StepRun
from workflows.domain.actions import http_url_problem
from workflows.domain.templates import contact_view, render_tree
from workflows.steps.webhook.config import WebhookConfig


class Webhook:
    action_type = "webhook"
    external = True

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(WebhookConfig, run.step.config)
        url = run.text(config.url, "url").strip()
        problem = http_url_problem(url)
        if problem:
            raise ValidationFailure(f"url: once filled in, it {problem}")
        headers = {}
        for name, value in config.headers:
            rendered = run.text(value, f"headers.{name}")
            if "\r" in rendered or "\n" in rendered:
                raise ValidationFailure(f"headers.{name}: must be on one line once filled in")
            headers[name] = rendered
        if config.method == "GET":
            body = None
        elif config.body is not None:
            body = render_tree(config.body, lambda text: run.text(text, "body"))
        else:
            body = self.envelope(run)
        response = channels.webhook_client().send(
            WebhookRequest(
                method=config.method,
                url=url,
                headers=headers,
                body=body,
                message_id=run.webhook_message_id,
                account_id=run.account_id,
                secret_names=config.secrets,
            )
        )
        # Two copies: the log row shows the redacted one; conditions and templates read the answer as it came.
        data = response.as_response_data()
        if response.body and not response.body_truncated:
            with contextlib.suppress(ValueError):
                data["json"] = json.loads(response.body)
        output = {**data, "body": response.text}
        output.pop("json", None)
        if response.text and not response.text_truncated:
            with contextlib.suppress(ValueError):  # `steps.<key>.body.plan`, `{{ steps.N.json.plan }}`
                output["json"] = json.loads(response.text)
        return ActionResult(data, output=output)

    @staticmethod
    def envelope(run: StepRun) -> dict[str, Any]:
        """What a webhook step sends when its config gives no body."""
        return {
            "type": "workflow.step",
            "run_id": str(run.execution_id),
            "workflow": {"id": run.workflow_id, "name": run.workflow_name},
            "step": {"index": run.step.index, "name": run.step.label},
            "event": run.context.get("event") or "",
            "trigger": run.context.get("trigger") or {},
            "contact": contact_view(run.contact),
        }


EXECUTOR = Webhook()
