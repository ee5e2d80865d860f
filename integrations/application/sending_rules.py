"""The sending rules in force for one message, and the account's settings they start from.

    purpose, rules = effective_rules(
        account_id=run.account_id,
        channel=Channel.SMS,
        workflow_rules=workflow.sending_rules,       # Workflow.sending_rules (read when sending: not versioned)
        step=config.sending,                         # the send step's overrides (parsed with its config)
        purpose=None,                                # or Purpose.TEST for "send a test"
    )
    verdict = decide(message, rules, now=..., sent=..., suppressed=...)   # integrations.domain.sending

The rule that picks among the layers is the domain's (`integrations.domain.sending.settings.resolve`); here
the account's row is read and the workflow's document parsed. The workflow is passed as its document, not
its id: workflows depends on integrations, never the other way round.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.db import transaction

from integrations.domain.sending.message import Channel, Purpose
from integrations.domain.sending.problems import Problem, Problems
from integrations.domain.sending.rules import SendingRules
from integrations.domain.sending.settings import (
    AccountSendingSettings,
    StepSendingRules,
    parse_account_settings,
    parse_workflow_rules,
    resolve,
)
from integrations.infrastructure.models import SendingSettings

log = logging.getLogger("relay.integrations")


class SendingSettingsInvalid(ValueError):
    """Settings refused, with every problem by its path; nothing was stored."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(str(problem) for problem in problems))
        self.problems = problems


def account_sending_settings(*, account_id: int) -> AccountSendingSettings:
    """The account's settings as the rules read them; the built-in defaults when it has set none. A stored
    value that no longer reads is logged and counts as not set (the default), never as "no rule"."""
    row = SendingSettings.objects.filter(account_id=account_id).first()
    if row is None:
        return AccountSendingSettings()
    problems = Problems()
    settings = parse_account_settings(row.as_document(), "", problems)
    if problems:
        log.warning("sending settings of account %s: %s", account_id, "; ".join(str(p) for p in problems))
    return settings


@transaction.atomic
def sending_settings_set(
    *,
    account_id: int,
    send_windows: Mapping[str, Any] | None = None,
    frequency_caps: list[Any] | None = None,
    when_capped: str | None = None,
) -> SendingSettings:
    """Set an account's settings; what is not given stays. Every problem is reported at once
    (SendingSettingsInvalid, by path: `send_windows.sms.hours[0]`) and nothing is stored."""
    row = SendingSettings.objects.select_for_update().filter(account_id=account_id).first()
    row = row or SendingSettings(account_id=account_id)
    if send_windows is not None:
        row.send_windows = dict(send_windows)
    if frequency_caps is not None:
        row.frequency_caps = list(frequency_caps)
    if when_capped is not None:
        row.when_capped = when_capped
    problems = Problems()
    parse_account_settings(row.as_document(), "", problems)
    if problems:
        raise SendingSettingsInvalid(list(problems))
    row.save()
    return row


def effective_rules(
    *,
    account_id: int,
    channel: Channel,
    workflow_rules: Mapping[str, Any] | None = None,
    step: StepSendingRules | None = None,
    purpose: Purpose | None = None,
) -> tuple[Purpose, SendingRules]:
    """The purpose and rules in force for one message of `channel`: the account's settings, then the
    workflow's document (`Workflow.sending_rules`), then the step's, the most specific winning each value
    whole. `purpose` given (a test send) wins; else the step's, the workflow's, marketing. One indexed read."""
    account = account_sending_settings(account_id=account_id)
    problems = Problems()
    workflow = parse_workflow_rules(workflow_rules or {}, "sending_rules", problems)
    if problems:
        log.warning("sending rules of a workflow of account %s: %s", account_id, "; ".join(str(p) for p in problems))
    return resolve(account=account, channel=channel, workflow=workflow, step=step, purpose=purpose)
