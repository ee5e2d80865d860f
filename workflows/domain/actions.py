"""The eight actions a step can take, and the rules for each one's config.

A config is checked when the workflow is saved, not when a run reaches the
step: an unknown action type, a missing subject, a URL without a scheme or a
template that does not compile are refused with the path of the problem
(`steps[2].config.url`) and the reason. Every config may also override the
step's retries (`max_attempts`, `base_delay` in seconds).

External actions (email, SMS, voice, webhook) reach the outside world: they
run before the transaction that records them, so they are at-least-once.
Internal actions (wait, update_contact, add_tag, remove_tag) change only
Relay's own tables: they run inside that transaction, so they happen exactly
once with the log row that records them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

from contacts.domain.clock import known_time_zone
from contacts.domain.model import ContactError, normalize_tag
from integrations.domain.channels import header_value_problem
from integrations.domain.sending.message import Channel
from integrations.domain.sending.problems import Problems
from integrations.domain.sending.settings import STEP_KEYS as SENDING_STEP_KEYS
from integrations.domain.sending.settings import StepSendingRules, parse_step_rules
from workflows.domain.conditions import EVENT_ROOTS, RUN_ROOTS, Condition, parse_conditions
from workflows.domain.triggers import EVENT_NAME
from workflows.domain.validation import Reader, is_template
from workflows.domain.waits import watched_field_problem

MAX_STEPS = 200
MAX_BRANCHES = 20
MAX_SPLIT_PATHS = 10
END = "$end"  # a `next` that ends the run
ENDED_BY_STEP = "ended by step"
STEP_KEY = re.compile(r"[a-z0-9_]{1,64}")
MAX_STEP_NAME = 200
MAX_WAIT_SECONDS = 366 * 24 * 3600
MAX_ATTEMPTS_LIMIT = 20
MAX_BASE_DELAY = 3600.0  # the default WORKFLOW_STEP_MAX_DELAY: a longer base would be cut to the cap unsaid
SMS_MAX_LENGTH = 1600  # ten concatenated segments
EMAIL_SUBJECT_MAX = 998  # RFC 5322 line length
EMAIL_TEXT_MAX = 100_000
EMAIL_HTML_MAX = 500_000
WEBHOOK_BODY_MAX_BYTES = 64 * 1024
WEBHOOK_METHODS = ("POST", "PUT", "PATCH", "DELETE", "GET")
# Set by the webhook client itself (signature, framing); a step may not override them.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
    }
)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")
_CUSTOM_FIELD_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_DURATION = re.compile(
    r"\s*(?:(?P<w>\d+)\s*w(?:eeks?)?)?\s*(?:(?P<d>\d+)\s*d(?:ays?)?)?\s*(?:(?P<h>\d+)\s*h(?:ours?)?)?"
    r"\s*(?:(?P<m>\d+)\s*m(?:in(?:ute)?s?)?)?\s*(?:(?P<s>\d+(?:\.\d+)?)\s*s(?:ec(?:ond)?s?)?)?\s*",
    re.IGNORECASE,
)
_UNIT_SECONDS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
_TIME_OF_DAY = re.compile(r"\s*(\d{1,2}):(\d{2})(?::(\d{2}))?\s*")
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")

RETRY_KEYS = ("max_attempts", "base_delay")


class ActionType(StrEnum):
    SEND_EMAIL = "send_email"
    SEND_SMS = "send_sms"
    SEND_VOICE = "send_voice"
    WEBHOOK = "webhook"
    WAIT = "wait"
    UPDATE_CONTACT = "update_contact"
    ADD_TAG = "add_tag"
    REMOVE_TAG = "remove_tag"
    BRANCH = "branch"  # the first branch whose conditions all hold, else the default
    SPLIT = "split"  # a weighted path picked by a hash of the run id
    WAIT_FOR_EVENT = "wait_for_event"  # until an event happens to the contact, or a timeout
    END = "end"  # the run completes at once


# Steps that choose their own way on: their paths are in their config, and their own `next` is refused.
DECIDING_ACTIONS = frozenset({ActionType.BRANCH, ActionType.SPLIT, ActionType.END})
# Steps a loop must pass through: a cycle without one would spin without ever waiting.
WAITING_ACTIONS = frozenset({ActionType.WAIT, ActionType.WAIT_FOR_EVENT})


EXTERNAL_ACTIONS = frozenset({ActionType.SEND_EMAIL, ActionType.SEND_SMS, ActionType.SEND_VOICE, ActionType.WEBHOOK})

# What each sending action sends: the sending rules (integrations.domain.sending) are asked per channel.
SENDING_CHANNELS = {
    ActionType.SEND_EMAIL: Channel.EMAIL,
    ActionType.SEND_SMS: Channel.SMS,
    ActionType.SEND_VOICE: Channel.VOICE,
}


@dataclass(frozen=True)
class RetryOverrides:
    max_attempts: int | None = None
    base_delay: float | None = None


# --- one config type per action ------------------------------------------------------------
# A send step may override the sending rules for its message (integrations.domain.sending.settings, STEP_KEYS):
# `purpose`, `send_window` (a preset, a window, or null: none), `frequency_caps` (a list; [] none), `when_capped`.
@dataclass(frozen=True)
class SendEmailConfig:
    subject: str
    text: str
    html: str | None = None
    sending: StepSendingRules = field(default_factory=StepSendingRules)


@dataclass(frozen=True)
class SendSmsConfig:
    body: str
    sending: StepSendingRules = field(default_factory=StepSendingRules)


@dataclass(frozen=True)
class SendVoiceConfig:
    message: str | None = None
    recording_url: str | None = None
    sending: StepSendingRules = field(default_factory=StepSendingRules)


@dataclass(frozen=True)
class WebhookConfig:
    url: str  # may hold templates; its scheme and host are fixed
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()  # values may hold templates
    body: Any = None  # JSON; every string in it is a template. None: Relay's standard envelope
    # Names of query parameters, headers and body keys whose values are secret besides those that always are
    # (Authorization, token, api_key ...): cut from what the step's log shows of the answer.
    secrets: tuple[str, ...] = ()


class WaitClock(StrEnum):
    """Whose clock a wait's date or time of day is read on (an IANA name may be given instead)."""

    CONTACT = "contact"  # the contact's own zone, else its phone number's, else the account's
    ACCOUNT = "account"


@dataclass(frozen=True)
class WaitConfig:
    seconds: float | None = None
    # ISO 8601: with a UTC offset, that instant; without one (a date-time or a date), read on `time_zone`.
    # Or a template that renders to either.
    until: str | None = None
    time_of_day: time | None = None  # the next time the clock reads this, on `time_zone`
    time_zone: str = WaitClock.CONTACT.value  # "contact", "account" or an IANA name


@dataclass(frozen=True)
class UpdateContactConfig:
    fields: tuple[tuple[str, str], ...] = ()  # contact field -> template
    custom_fields: tuple[tuple[str, Any], ...] = ()  # key -> JSON value (strings are templates)


@dataclass(frozen=True)
class TagConfig:
    tag: str  # normalized, or a template normalized when the step runs


@dataclass(frozen=True)
class Branch:
    name: str
    conditions: tuple[Condition, ...]
    next: str  # a step key, or END


@dataclass(frozen=True)
class BranchConfig:
    branches: tuple[Branch, ...]
    default: str  # a step key, or END


@dataclass(frozen=True)
class SplitPath:
    name: str
    weight: int  # 1-100; a split's weights sum to 100
    next: str


@dataclass(frozen=True)
class SplitConfig:
    paths: tuple[SplitPath, ...]

    def path_for(self, bucket: int) -> SplitPath:
        """The path a bucket (0-99) falls in: the first `weight` buckets go to the first path, and so on."""
        upto = 0
        for path in self.paths:
            upto += path.weight
            if bucket < upto:
                return path
        return self.paths[-1]


def split_bucket(run_id: UUID, step_key: str) -> int:
    """A run's bucket (0-99) at a split: a hash of the run id (and the split's key, so two splits of one
    run are independent). The same run always gets the same bucket: a retry or a crash keeps its path."""
    digest = hashlib.sha256(f"{run_id}:{step_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 100


@dataclass(frozen=True)
class WaitForEventConfig:
    event: str
    match: Any  # checked per event; its meaning is the events' (workflows.domain.actions._event_match)
    timeout: float  # seconds
    on_timeout: str  # a step key, or END


@dataclass(frozen=True)
class EndConfig:
    pass


ActionConfig = (
    SendEmailConfig
    | SendSmsConfig
    | SendVoiceConfig
    | WebhookConfig
    | WaitConfig
    | UpdateContactConfig
    | TagConfig
    | BranchConfig
    | SplitConfig
    | WaitForEventConfig
    | EndConfig
)


def config_exits(config: ActionConfig, path: str) -> list[tuple[str, str]]:
    """Where a step's config may send the run: (field path, step key or END), for the graph's checks."""
    if isinstance(config, BranchConfig):
        exits = [(f"{path}.branches[{i}].next", b.next) for i, b in enumerate(config.branches)]
        return [*exits, (f"{path}.default", config.default)]
    if isinstance(config, SplitConfig):
        return [(f"{path}.paths[{i}].next", p.next) for i, p in enumerate(config.paths)]
    if isinstance(config, WaitForEventConfig):
        return [(f"{path}.on_timeout", config.on_timeout)]
    return []


# --- parsing ----------------------------------------------------------------------------------
def parse_action_config(action_type: ActionType, reader: Reader) -> ActionConfig:
    """The typed config of one step; problems go to reader.errors (then the result is not to be used)."""
    parser = _PARSERS[action_type]
    config = parser(reader)
    reader.refuse_unknown([*_KEYS[action_type], *RETRY_KEYS])
    return config


def parse_retry_overrides(reader: Reader) -> RetryOverrides:
    attempts = reader.number("max_attempts", minimum=1, maximum=MAX_ATTEMPTS_LIMIT, integer=True)
    base_delay = reader.number("base_delay", minimum=0, maximum=MAX_BASE_DELAY)
    return RetryOverrides(
        max_attempts=int(attempts) if attempts is not None else None,
        base_delay=float(base_delay) if base_delay is not None else None,
    )


def _sending(r: Reader) -> StepSendingRules:
    """A send step's overrides of the sending rules, every problem by its path (steps[2].config.send_window)."""
    problems = Problems()
    raw = {key: r.get(key) for key in SENDING_STEP_KEYS if key in r.raw}
    found = parse_step_rules(raw, r.path, problems)
    for problem in problems:
        r.error(problem.path, problem.reason)
    return found


def _send_email(r: Reader) -> SendEmailConfig:
    subject = r.template("subject", required=True, max_length=EMAIL_SUBJECT_MAX)
    text = r.template("text", required=True, max_length=EMAIL_TEXT_MAX)
    html = r.template("html", max_length=EMAIL_HTML_MAX)
    return SendEmailConfig(subject=subject or "", text=text or "", html=html, sending=_sending(r))


def _send_sms(r: Reader) -> SendSmsConfig:
    body = r.template("body", required=True, max_length=SMS_MAX_LENGTH) or ""
    return SendSmsConfig(body=body, sending=_sending(r))


def _send_voice(r: Reader) -> SendVoiceConfig:
    message = r.template("message", max_length=4000)
    recording_url = r.string("recording_url", max_length=2000)
    if (message is None) == (recording_url is None) and not any(e.path.startswith(r.path) for e in r.errors):
        r.error(r.path, "needs exactly one of `message` (text read to the contact) or `recording_url`")
    if recording_url is not None:
        reason = http_url_problem(recording_url)
        if reason:
            r.error(r.at("recording_url"), reason)
    return SendVoiceConfig(message=message, recording_url=recording_url, sending=_sending(r))


def _webhook(r: Reader) -> WebhookConfig:
    method = r.string("method", choices=WEBHOOK_METHODS, default="POST")
    url = r.string("url", required=True, max_length=2000)
    if url is not None:
        check_webhook_url(r, url)
    headers = webhook_headers(r)
    body = r.json_value("body", max_bytes=WEBHOOK_BODY_MAX_BYTES)
    if body is not None:
        r.check_templates_in(r.at("body"), body)
    secrets = _secret_names(r)
    return WebhookConfig(url=url or "", method=method or "POST", headers=headers, body=body, secrets=secrets)


MAX_SECRET_NAMES = 50


def _secret_names(r: Reader) -> tuple[str, ...]:
    """`secrets`: the names (query parameters, headers, body keys) whose values this step marks secret."""
    raw = r.get("secrets")
    if raw is None:
        return ()
    path = r.at("secrets")
    if not isinstance(raw, list) or len(raw) > MAX_SECRET_NAMES:
        r.error(path, f"must be a list of at most {MAX_SECRET_NAMES} names (query parameters, headers, body keys)")
        return ()
    names: list[str] = []
    for index, name in enumerate(raw):
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            r.error(f"{path}[{index}]", "must be a name of 1 to 100 letters, digits and - _ . (no spaces)")
        elif name not in names:
            names.append(name)
    return tuple(names)


def webhook_headers(r: Reader) -> tuple[tuple[str, str], ...]:
    """The `headers` a webhook may send (a step's, a scheduled hook's): names and values the client will accept,
    none of Relay's own; each problem named by its path."""
    headers: list[tuple[str, str]] = []
    raw_headers = r.mapping("headers", max_items=50) or {}
    for name, value in raw_headers.items():
        path = f"{r.at('headers')}.{name}"
        if not _HEADER_NAME.fullmatch(str(name)):
            r.error(path, "is not a valid HTTP header name")
        elif str(name).lower() in RESERVED_HEADERS:
            r.error(path, "is set by Relay's webhook client and cannot be overridden")
        elif not isinstance(value, str):
            r.error(path, "must be a string")
        elif len(value) > 4000:
            r.error(path, "must be at most 4000 characters")
        elif not is_template(value) and (problem := header_value_problem(value)):
            r.error(path, problem)  # a template is checked when it is rendered, by the webhook client
        elif "\r" in value or "\n" in value:
            r.error(path, "must be on one line")
        elif r.check_template_at(path, value):
            headers.append((str(name), value))
    return tuple(headers)


def check_webhook_url(r: Reader, url: str) -> None:
    """A webhook URL (a step's, a scheduled hook's) at save: an http(s) URL whose host the SSRF guard would let
    through (`r.context.check_webhook_target`, the send-time guard and allow-list), so what would be refused
    at send time is refused now, naming `<path>.url`."""
    path = r.at("url")
    if is_template(url):
        # The scheme and host are fixed when the workflow is saved; only what follows may vary per run.
        fixed = url.split("{", 1)[0]
        scheme, _, rest = fixed.partition("://")
        host = rest.split("/", 1)[0] if "/" in rest else ""
        if scheme.lower() not in ("http", "https") or not host:
            r.error(path, "must start with http:// or https:// and a fixed host; templates may fill in only the path")
            return
        if r.context.check_webhook_target is not None and (refused := r.context.check_webhook_target(fixed)):
            r.error(path, guard_refusal(refused))
            return
        r.check_template_at(path, url)
        return
    reason = http_url_problem(url)
    if reason:
        r.error(path, reason)
    elif r.context.check_webhook_target is not None and (refused := r.context.check_webhook_target(url)):
        r.error(path, guard_refusal(refused))


def guard_refusal(reason: str) -> str:
    """The SSRF guard's refusal of a webhook URL, in words a marketer and their operator can act on."""
    return (
        f"Relay will not send webhooks to this address: {reason}. "
        "If it is an internal service you trust, an operator can allow its host with WEBHOOK_ALLOWED_HOSTS"
    )


def http_url_problem(url: str) -> str | None:
    """Why `url` is not an absolute http(s) URL, or None."""
    if any(ch.isspace() for ch in url):
        return "must not contain spaces"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a valid URL"
    if parts.scheme.lower() not in ("http", "https"):
        return "must be an http:// or https:// URL"
    if not parts.hostname:
        return "must name a host"
    return None


def _wait(r: Reader) -> WaitConfig:
    seconds: float | None = None
    until: str | None = None
    duration = r.get("duration")
    if duration is not None:
        seconds = _duration_seconds(r, duration)
    raw_until = r.string("until", max_length=500)
    if raw_until is not None:
        if is_template(raw_until):
            if r.check_template_at(r.at("until"), raw_until):
                until = raw_until
        else:
            reason = wait_until_problem(raw_until)
            if reason:
                r.error(r.at("until"), reason)
            else:
                until = raw_until
    raw_time = r.string("time_of_day", max_length=8)
    time_of_day = None
    if raw_time is not None:
        time_of_day = parse_time_of_day(raw_time)
        if time_of_day is None:
            r.error(r.at("time_of_day"), 'must be a time of day as "HH:MM" on a 24-hour clock, e.g. "09:00"')
    if sum(value is not None for value in (duration, raw_until, raw_time)) != 1:
        r.error(
            r.path,
            'needs exactly one of `duration` (e.g. 2, "90s", "3h", "2d 12h"), `until` (a date or date-time) '
            'or `time_of_day` (e.g. "09:00")',
        )
    zone = r.string("time_zone", max_length=64)
    if zone is not None:
        if zone not in (WaitClock.CONTACT, WaitClock.ACCOUNT) and known_time_zone(zone) != zone:
            r.error(
                r.at("time_zone"),
                'must be "contact" (the contact\'s time zone), "account" or an IANA time zone name such as '
                "Europe/Paris",
            )
        elif duration is not None:
            r.error(r.at("time_zone"), "applies to `until` or `time_of_day`; a duration is the same everywhere")
    return WaitConfig(seconds=seconds, until=until, time_of_day=time_of_day, time_zone=zone or WaitClock.CONTACT.value)


def parse_time_of_day(text: str) -> time | None:
    """`"09:00"` or `"9:00:30"` -> a time; None when it is no time of day."""
    match = _TIME_OF_DAY.fullmatch(text)
    if match is None:
        return None
    hours, minutes, seconds = int(match[1]), int(match[2]), int(match[3] or 0)
    if hours > 23 or minutes > 59 or seconds > 59:
        return None
    return time(hours, minutes, seconds)


def parse_wait_until(text: str) -> datetime:
    """A wait's `until`: an ISO 8601 date-time (aware: that instant; naive: a wall-clock time, to be read on
    the wait's clock) or a date (its midnight, on that clock). Raises ValueError otherwise."""
    stripped = text.strip()
    if _DATE_ONLY.fullmatch(stripped):
        return datetime.combine(date.fromisoformat(stripped), time(0))
    value = datetime.fromisoformat(stripped)
    if value.tzinfo is not None and value.utcoffset() is None:
        raise ValueError("has a time zone without an offset")
    return value


def wait_until_problem(text: str) -> str | None:
    try:
        parse_wait_until(text)
    except ValueError:
        return (
            "must be an ISO 8601 date or date-time: 2026-12-01T09:00:00Z (that instant), 2026-12-01T09:00 or "
            "2026-12-01 (read in `time_zone`: the contact's by default)"
        )
    return None


def _duration_seconds(r: Reader, value: Any, key: str = "duration") -> float | None:
    path = r.at(key)
    if isinstance(value, bool):
        r.error(path, 'must be a number of seconds or a text like "90s", "3h", "2d 12h"')
        return None
    seconds: float | None
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = parse_duration(value)
        if seconds is None:
            r.error(path, 'must be a number of seconds or a text like "90s", "3h", "2d 12h"')
            return None
    else:
        r.error(path, 'must be a number of seconds or a text like "90s", "3h", "2d 12h"')
        return None
    if not 0 < seconds <= MAX_WAIT_SECONDS:
        r.error(path, f"must be more than 0 and at most {MAX_WAIT_SECONDS // 86400} days")
        return None
    return seconds


def parse_duration(text: str) -> float | None:
    """`"2d 12h"` -> 216000.0; a bare number is seconds; None when it is not a duration."""
    stripped = text.strip()
    if not stripped:
        return None
    try:
        return float(stripped)
    except ValueError:
        pass
    match = _DURATION.fullmatch(stripped)
    if not match or not any(match.groupdict().values()):
        return None
    return sum(float(v) * _UNIT_SECONDS[k] for k, v in match.groupdict().items() if v)


def parse_datetime(text: str) -> datetime:
    """An ISO 8601 date-time with a UTC offset; raises ValueError otherwise (naive times are ambiguous)."""
    value = datetime.fromisoformat(text.strip())
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("needs a UTC offset, e.g. 2026-12-01T09:00:00+00:00 or ...Z")
    return value


def _update_contact(r: Reader) -> UpdateContactConfig:
    fields: list[tuple[str, str]] = []
    raw_fields = r.mapping("fields", max_items=20) or {}
    allowed = r.context.contact_fields
    for name, value in raw_fields.items():
        path = f"{r.at('fields')}.{name}"
        if name not in allowed:
            r.error(path, f"is not a contact field a step may set; expected one of: {', '.join(sorted(allowed))}")
        elif not isinstance(value, str):
            r.error(path, "must be a string")
        elif len(value) > 1000:
            r.error(path, "must be at most 1000 characters")
        elif r.check_template_at(path, value):
            fields.append((name, value))
    custom: list[tuple[str, Any]] = []
    raw_custom = r.mapping("custom_fields", max_items=100) or {}
    for key, value in raw_custom.items():
        path = f"{r.at('custom_fields')}.{key}"
        if not _CUSTOM_FIELD_KEY.fullmatch(str(key)):
            r.error(path, "a custom field name is a letter, then letters, digits or _ (at most 64)")
            continue
        before = len(r.errors)
        if r.check_json(path, value, max_bytes=16 * 1024):
            r.check_templates_in(path, value)
        if len(r.errors) == before:
            custom.append((str(key), value))
    if not raw_fields and not raw_custom and not any(e.path.startswith(r.path) for e in r.errors):
        r.error(r.path, "needs `fields` or `custom_fields` to set")
    return UpdateContactConfig(fields=tuple(fields), custom_fields=tuple(custom))


def _tag(r: Reader) -> TagConfig:
    tag = r.string("tag", required=True, max_length=500)
    if tag is None:
        return TagConfig(tag="")
    if is_template(tag):
        r.check_template_at(r.at("tag"), tag)
        return TagConfig(tag=tag)
    try:
        return TagConfig(tag=normalize_tag(tag))
    except ContactError as exc:
        r.error(r.at("tag"), exc.reason)
        return TagConfig(tag="")


def _target(r: Reader, key: str) -> str:
    """A step key (that it names a step is the graph's check) or END."""
    return _check_target(r, r.get(key), r.at(key))


def _item_target(r: Reader, item: Mapping[str, Any], path: str) -> str:
    return _check_target(r, item.get("next"), f"{path}.next")


def _check_target(r: Reader, value: Any, path: str) -> str:
    if value is None or value == "":
        r.error(path, f'is required: a step key, or "{END}" to end the run')
        return ""
    if not isinstance(value, str) or not (value == END or STEP_KEY.fullmatch(value)):
        r.error(path, f'must be a step key (a-z, 0-9, _; at most 64) or "{END}"')
        return ""
    return value


def _items(r: Reader, key: str, *, minimum: int, maximum: int) -> list[tuple[str, Mapping[str, Any]]]:
    raw = r.get(key)
    path = r.at(key)
    if not isinstance(raw, list) or len(raw) < minimum:
        r.error(path, f"must be a list of at least {minimum}")
        return []
    if len(raw) > maximum:
        r.error(path, f"must have at most {maximum} entries")
        return []
    items = []
    for index, item in enumerate(raw):
        item_path = f"{path}[{index}]"
        if not isinstance(item, Mapping):
            r.error(item_path, "must be an object")
            continue
        items.append((item_path, item))
    return items


def _name(r: Reader, item: Mapping[str, Any], path: str, index: int, names: set[str]) -> str:
    name = item.get("name")
    if name is None or name == "":
        name = f"{chr(ord('A') + index)}" if index < 26 else f"path {index + 1}"
    if not isinstance(name, str) or len(name) > MAX_STEP_NAME:
        r.error(f"{path}.name", f"must be a text of at most {MAX_STEP_NAME} characters")
        return ""
    if name in names:
        r.error(f"{path}.name", f"{name!r} is used twice in this step")
    names.add(name)
    return name


def _branch(r: Reader) -> BranchConfig:
    branches = []
    names: set[str] = set()
    for index, (path, item) in enumerate(_items(r, "branches", minimum=1, maximum=MAX_BRANCHES)):
        for extra in item:
            if extra not in ("name", "conditions", "next"):
                r.error(f"{path}.{extra}", "is not a known setting; expected name, conditions, next")
        name = _name(r, item, path, index, names)
        conditions = parse_conditions(
            item.get("conditions"), f"{path}.conditions", r.errors, roots=RUN_ROOTS, allow_empty=False
        )
        branches.append(Branch(name=name, conditions=tuple(conditions), next=_item_target(r, item, path)))
    return BranchConfig(branches=tuple(branches), default=_target(r, "default"))


def _split(r: Reader) -> SplitConfig:
    paths = []
    names: set[str] = set()
    items = _items(r, "paths", minimum=2, maximum=MAX_SPLIT_PATHS)
    for index, (path, item) in enumerate(items):
        for extra in item:
            if extra not in ("name", "weight", "next"):
                r.error(f"{path}.{extra}", "is not a known setting; expected name, weight, next")
        name = _name(r, item, path, index, names)
        weight = item.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            r.error(f"{path}.weight", "must be a whole number from 1 to 100")
            weight = 0
        paths.append(SplitPath(name=name, weight=weight, next=_item_target(r, item, path)))
    total = sum(p.weight for p in paths)
    if paths and len(paths) == len(items) and all(p.weight for p in paths) and total != 100:
        r.error(r.at("paths"), f"the weights must sum to 100 (they sum to {total})")
    return SplitConfig(paths=tuple(paths))


def _wait_for_event(r: Reader) -> WaitForEventConfig:
    event = r.string(
        "event",
        required=True,
        max_length=100,
        pattern=EVENT_NAME,
        pattern_reason="an event name is letters, digits and . _ : - (at most 100), e.g. email.clicked",
    )
    raw_match = r.get("match")
    match = _event_match(r, event or "", raw_match if raw_match is not None else {})
    seconds = None
    timeout = r.get("timeout")
    if timeout is None:
        r.error(r.at("timeout"), 'is required: how long to wait, e.g. "3 days" or a number of seconds')
    else:
        seconds = _duration_seconds(r, timeout, key="timeout")
    return WaitForEventConfig(
        event=event or "", match=match, timeout=seconds or 0.0, on_timeout=_target(r, "on_timeout")
    )


# What a wait may match, per event (the CONTRACT); any other (custom) event: conditions over its data.
_MATCH_KEYS: dict[str, tuple[str, ...]] = {
    "tag.added": ("tag",),
    "tag.removed": ("tag",),
    "contact.updated": ("field", "value"),
    "email.opened": ("step",),
    "email.clicked": ("step", "link"),
    "sms.replied": ("contains",),
}


def _event_match(r: Reader, event: str, raw: Any) -> dict[str, Any]:
    path = r.at("match")
    if not isinstance(raw, Mapping):
        r.error(path, "must be an object")
        return {}
    allowed = _MATCH_KEYS.get(event, ("conditions",))
    match: dict[str, Any] = {}
    for key, value in raw.items():
        key_path = f"{path}.{key}"
        if key not in allowed:
            expected = ", ".join(allowed)
            r.error(key_path, f"is not a known setting for {event or 'this event'}; expected one of: {expected}")
        elif key == "conditions":
            conditions = parse_conditions(value, key_path, r.errors, roots=EVENT_ROOTS)
            match[key] = [c.as_dict() for c in conditions]
        elif key == "tag":
            if not isinstance(value, str):
                r.error(key_path, "must be a string")
                continue
            try:
                match[key] = normalize_tag(value)
            except ContactError as exc:
                r.error(key_path, exc.reason)
        elif key == "step":
            if not isinstance(value, str) or not STEP_KEY.fullmatch(value):
                r.error(key_path, "must be the key of an email step of this workflow")
            else:
                match[key] = value
        elif key == "link":
            problem = http_url_problem(value) if isinstance(value, str) else "must be a URL"
            if problem:
                r.error(key_path, problem)
            else:
                match[key] = value
        elif key == "field" and event == "contact.updated" and r.context.check_watched_fields:
            problem = watched_field_problem(value)
            if problem:
                r.error(key_path, problem)
            else:
                match[key] = value
        elif key == "value":
            if not isinstance(value, str | int | float | bool):
                r.error(key_path, "must be a string, number or boolean")
            else:
                match[key] = value
        elif not isinstance(value, str) or not value or len(value) > 200:
            r.error(key_path, "must be a text of at most 200 characters")
        else:
            match[key] = value
    clean = not any(e.path.startswith(path) for e in r.errors)
    if event == "contact.updated" and "field" not in raw and clean:
        r.error(f"{path}.field", "is required: which contact field must change")
    if event in ("tag.added", "tag.removed") and "tag" not in raw and clean:
        r.error(f"{path}.tag", "is required: which tag")
    return match


def _end(r: Reader) -> EndConfig:
    return EndConfig()


_PARSERS: dict[ActionType, Callable[[Reader], ActionConfig]] = {
    ActionType.SEND_EMAIL: _send_email,
    ActionType.SEND_SMS: _send_sms,
    ActionType.SEND_VOICE: _send_voice,
    ActionType.WEBHOOK: _webhook,
    ActionType.WAIT: _wait,
    ActionType.UPDATE_CONTACT: _update_contact,
    ActionType.ADD_TAG: _tag,
    ActionType.REMOVE_TAG: _tag,
    ActionType.BRANCH: _branch,
    ActionType.SPLIT: _split,
    ActionType.WAIT_FOR_EVENT: _wait_for_event,
    ActionType.END: _end,
}
_KEYS: dict[ActionType, tuple[str, ...]] = {
    ActionType.SEND_EMAIL: ("subject", "text", "html", *SENDING_STEP_KEYS),
    ActionType.SEND_SMS: ("body", *SENDING_STEP_KEYS),
    ActionType.SEND_VOICE: ("message", "recording_url", *SENDING_STEP_KEYS),
    ActionType.WEBHOOK: ("method", "url", "headers", "body", "secrets"),
    ActionType.WAIT: ("duration", "until", "time_of_day", "time_zone"),
    ActionType.UPDATE_CONTACT: ("fields", "custom_fields"),
    ActionType.ADD_TAG: ("tag",),
    ActionType.REMOVE_TAG: ("tag",),
    ActionType.BRANCH: ("branches", "default"),
    ActionType.SPLIT: ("paths",),
    ActionType.WAIT_FOR_EVENT: ("event", "match", "timeout", "on_timeout"),
    ActionType.END: (),
}
