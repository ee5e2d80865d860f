"""Where the rules in force come from: the account's settings, the workflow's overrides, the step's.

Three layers, each read from JSON with every problem named by its path:

- the account (`AccountSendingSettings`): a window per channel (absent: the built-in default, the US federal
  window for SMS and calls, none for email; `null`: no window), its frequency caps (each for all channels or
  one), and what happens over a cap (defer, the default, or skip);
- the workflow (`WorkflowSendingRules`, `Workflow.sending_rules`): its purpose (marketing, the default, or
  transactional), whether its transactional messages are exempt from the window (an explicit choice), a
  window for all its messages and per channel, its own caps and `when_capped`;
- the step (`StepSendingRules`, keys of a send step's config): `purpose`, `send_window`, `frequency_caps`,
  `when_capped`.

A value that does not read (a problem was reported for it) counts as not set, so stored settings that a
later release reads differently never loosen the rules: the layer under decides. The most specific layer
that sets a value wins it whole: a step's `send_window` replaces the workflow's and
the account's (`null`: this step has none), a workflow's `frequency_caps` replace the account's (`[]`: none).
Not merged key by key, so what a message obeys is always one readable value. `resolve` is the whole rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

from integrations.domain.sending.caps import FrequencyCap, WhenCapped, parse_caps
from integrations.domain.sending.message import Channel, Purpose
from integrations.domain.sending.problems import Problems
from integrations.domain.sending.rules import SendingRules
from integrations.domain.sending.windows import DEFAULT_WINDOW_PRESET, PRESETS, SendWindow, parse_window


class _Unset(Enum):
    UNSET = "unset"


UNSET: Final = _Unset.UNSET  # a layer that says nothing: the layer under it decides
type Layered[T] = T | _Unset

# Built in: marketing SMS and calls of an account that chose nothing keep to the US federal window.
DEFAULT_WINDOWS: dict[Channel, SendWindow | None] = {
    Channel.EMAIL: None,
    Channel.SMS: PRESETS[DEFAULT_WINDOW_PRESET].window,
    Channel.VOICE: PRESETS[DEFAULT_WINDOW_PRESET].window,
}
STEP_KEYS = ("purpose", "send_window", "frequency_caps", "when_capped")
WORKFLOW_KEYS = (
    "purpose",
    "transactional_window",
    "send_window",
    "send_windows",
    "frequency_caps",
    "when_capped",
)
ACCOUNT_KEYS = ("send_windows", "frequency_caps", "when_capped")
TRANSACTIONAL_WINDOW = ("applies", "exempt")


@dataclass(frozen=True)
class AccountSendingSettings:
    windows: Mapping[Channel, SendWindow | None] = field(default_factory=dict)  # absent channel: DEFAULT_WINDOWS
    caps: tuple[FrequencyCap, ...] = ()
    when_capped: WhenCapped = WhenCapped.DEFER

    def window(self, channel: Channel) -> SendWindow | None:
        return self.windows[channel] if channel in self.windows else DEFAULT_WINDOWS[channel]


@dataclass(frozen=True)
class WorkflowSendingRules:
    purpose: Layered[Purpose] = UNSET
    transactional_exempt_from_window: bool = False
    window: Layered[SendWindow | None] = UNSET  # every channel of the workflow
    windows: Mapping[Channel, SendWindow | None] = field(default_factory=dict)  # per channel, over `window`
    caps: Layered[tuple[FrequencyCap, ...]] = UNSET
    when_capped: Layered[WhenCapped] = UNSET

    def window_for(self, channel: Channel) -> Layered[SendWindow | None]:
        return self.windows.get(channel, self.window)


@dataclass(frozen=True)
class StepSendingRules:
    purpose: Layered[Purpose] = UNSET
    window: Layered[SendWindow | None] = UNSET
    caps: Layered[tuple[FrequencyCap, ...]] = UNSET
    when_capped: Layered[WhenCapped] = UNSET


def _first[T](*values: Layered[T], default: T) -> T:
    for value in values:
        if value is not UNSET:
            return value
    return default


def resolve(
    *,
    account: AccountSendingSettings,
    channel: Channel,
    workflow: WorkflowSendingRules | None = None,
    step: StepSendingRules | None = None,
    purpose: Purpose | None = None,
) -> tuple[Purpose, SendingRules]:
    """The purpose and the rules in force for one message. `purpose` given by the sender wins (a test send);
    else the step's, the workflow's, marketing."""
    workflow = workflow or WorkflowSendingRules()
    step = step or StepSendingRules()
    chosen = purpose if purpose is not None else _first(step.purpose, workflow.purpose, default=Purpose.MARKETING)
    window = _first(step.window, workflow.window_for(channel), default=account.window(channel))
    caps = _first(step.caps, workflow.caps, default=account.caps)
    when_capped = _first(step.when_capped, workflow.when_capped, default=account.when_capped)
    return chosen, SendingRules(
        window=window,
        caps=caps,
        when_capped=when_capped,
        transactional_exempt_from_window=workflow.transactional_exempt_from_window,
    )


# --- reading each layer --------------------------------------------------------------------------------
def _unknown(raw: Mapping[str, Any], keys: tuple[str, ...], path: str, problems: Problems) -> None:
    for key in raw:
        if key not in keys:
            problems.add(_at(path, key), f"is not a sending setting; expected one of: {', '.join(keys)}")


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _window(raw: Mapping[str, Any], key: str, path: str, problems: Problems) -> Layered[SendWindow | None]:
    if key not in raw:
        return UNSET
    value = raw[key]
    if value is None:
        return None  # said outright: no window
    found = parse_window(value, _at(path, key), problems)
    return UNSET if found is None else found  # a window that does not read never loosens: the layer under decides


def _windows(raw: Mapping[str, Any], key: str, path: str, problems: Problems) -> dict[Channel, SendWindow | None]:
    value = raw.get(key, {})
    where = _at(path, key)
    if not isinstance(value, Mapping):
        problems.add(where, 'must map a channel to its window, e.g. {"sms": "us_federal", "email": null}')
        return {}
    windows: dict[Channel, SendWindow | None] = {}
    for name, spec in value.items():
        try:
            channel = Channel(name)
        except ValueError:
            problems.add(f"{where}.{name}", f"is not a channel; expected one of: {', '.join(c.value for c in Channel)}")
            continue
        if spec is None:
            windows[channel] = None
        elif (found := parse_window(spec, f"{where}.{name}", problems)) is not None:
            windows[channel] = found  # one that does not read is left out: the layer under decides
    return windows


def _caps(raw: Mapping[str, Any], path: str, problems: Problems) -> Layered[tuple[FrequencyCap, ...]]:
    if "frequency_caps" not in raw:
        return UNSET
    found = parse_caps(raw["frequency_caps"], _at(path, "frequency_caps"), problems)
    return UNSET if found is None else found


def _when_capped(raw: Mapping[str, Any], path: str, problems: Problems) -> Layered[WhenCapped]:
    if "when_capped" not in raw:
        return UNSET
    try:
        return WhenCapped(raw["when_capped"])
    except ValueError:
        problems.add(_at(path, "when_capped"), "must be defer (wait until under the cap) or skip (skip the message)")
        return UNSET


def _purpose(raw: Mapping[str, Any], path: str, problems: Problems) -> Layered[Purpose]:
    if "purpose" not in raw:
        return UNSET
    value = raw["purpose"]
    if value not in (Purpose.MARKETING.value, Purpose.TRANSACTIONAL.value):
        problems.add(_at(path, "purpose"), "must be marketing or transactional")
        return UNSET
    return Purpose(value)


def _mapping(raw: Any, path: str, problems: Problems) -> Mapping[str, Any] | None:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.add(path or "sending_rules", "must be an object")
        return None
    return raw


def parse_account_settings(raw: Any, path: str, problems: Problems) -> AccountSendingSettings:
    """`{"send_windows": {"sms": "us_fl", "email": {"days": [...], "hours": [...]}}, "frequency_caps": [...],
    "when_capped": "defer"}`."""
    found = _mapping(raw, path, problems)
    if found is None:
        return AccountSendingSettings()
    _unknown(found, ACCOUNT_KEYS, path, problems)
    windows = _windows(found, "send_windows", path, problems)
    caps = _caps(found, path, problems)
    when_capped = _when_capped(found, path, problems)
    return AccountSendingSettings(
        windows=windows,
        caps=() if caps is UNSET else caps,
        when_capped=WhenCapped.DEFER if when_capped is UNSET else when_capped,
    )


def parse_workflow_rules(raw: Any, path: str, problems: Problems) -> WorkflowSendingRules:
    """`{"purpose": "transactional", "transactional_window": "exempt", "send_window": "fr",
    "send_windows": {"sms": "us_fl"}, "frequency_caps": [...], "when_capped": "skip"}`, every key optional."""
    found = _mapping(raw, path, problems)
    if found is None:
        return WorkflowSendingRules()
    _unknown(found, WORKFLOW_KEYS, path, problems)
    exempt = found.get("transactional_window", "applies")
    if exempt not in TRANSACTIONAL_WINDOW:
        problems.add(_at(path, "transactional_window"), "must be applies (the default) or exempt")
    return WorkflowSendingRules(
        purpose=_purpose(found, path, problems),
        transactional_exempt_from_window=exempt == "exempt",
        window=_window(found, "send_window", path, problems),
        windows=_windows(found, "send_windows", path, problems),
        caps=_caps(found, path, problems),
        when_capped=_when_capped(found, path, problems),
    )


def parse_step_rules(raw: Mapping[str, Any], path: str, problems: Problems) -> StepSendingRules:
    """The sending keys of a send step's config (`STEP_KEYS`); its other keys are the step's own business."""
    return StepSendingRules(
        purpose=_purpose(raw, path, problems),
        window=_window(raw, "send_window", path, problems),
        caps=_caps(raw, path, problems),
        when_capped=_when_capped(raw, path, problems),
    )
