"""The sending rules: what every outbound email, SMS and call is asked before it leaves. Plain Python.

Each rule is one function that answers `Send`, `Defer(until, reason)` or `Refuse(reason)`:

consent.py   consent (law: no marketing email to the unsubscribed, no SMS or call to an opted-out number),
             the address (nowhere to send), suppression (a list given in)
windows.py   the send window on the contact's clock, its presets (us_federal, us_fl, fr) and holidays
caps.py      frequency caps per contact, rolling or by calendar day, all channels or one
rules.py     `SendingRules` (what is in force for one message) and `decide` (the order, and how answers combine)
settings.py  the layers they come from (account, workflow, step) and `resolve`, the rule that picks among them

Settings are read from JSON with every problem named by its path (`parse_window`, `parse_caps`,
`parse_account_settings`, `parse_workflow_rules`, `parse_step_rules`).
"""

from integrations.domain.sending.caps import FrequencyCap, WhenCapped, frequency_cap, parse_caps
from integrations.domain.sending.consent import address, consent, suppression
from integrations.domain.sending.message import Channel, Outbound, Purpose, SentMessage
from integrations.domain.sending.problems import Problem, Problems
from integrations.domain.sending.rules import SendingRules, decide
from integrations.domain.sending.settings import (
    AccountSendingSettings,
    StepSendingRules,
    WorkflowSendingRules,
    parse_account_settings,
    parse_step_rules,
    parse_workflow_rules,
    resolve,
)
from integrations.domain.sending.verdicts import SEND, Defer, Refuse, Rule, Send, Verdict, combine
from integrations.domain.sending.windows import PRESETS, SendWindow, Span, parse_window, send_window

__all__ = [
    "PRESETS",
    "SEND",
    "AccountSendingSettings",
    "Channel",
    "Defer",
    "FrequencyCap",
    "Outbound",
    "Problem",
    "Problems",
    "Purpose",
    "Refuse",
    "Rule",
    "Send",
    "SendWindow",
    "SendingRules",
    "SentMessage",
    "Span",
    "StepSendingRules",
    "Verdict",
    "WhenCapped",
    "WorkflowSendingRules",
    "address",
    "combine",
    "consent",
    "decide",
    "frequency_cap",
    "parse_account_settings",
    "parse_caps",
    "parse_step_rules",
    "parse_window",
    "parse_workflow_rules",
    "resolve",
    "send_window",
    "suppression",
]
