"""What every step type's config shares: the limits, the retry overrides, and the readers several types use.

A config is checked when the workflow is saved, not when a run reaches the step: an unknown action type,
a missing subject, a URL without a scheme or a template that does not compile are refused with the path of
the problem (`steps[2].config.url`) and the reason. Each type's own rules are in its folder
(`workflows/steps/<name>/config.py`); every config may also override the step's retries (`max_attempts`,
`base_delay` in seconds).

External actions (email, SMS, voice, webhook) reach the outside world: they run before the transaction that
records them, so they are at-least-once. Internal actions (wait, update_contact, add_tag, remove_tag ...)
change only Relay's own tables: they run inside that transaction, so they happen exactly once with the log
row that records them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from integrations.domain.sending.problems import Problems
from integrations.domain.sending.settings import STEP_KEYS as SENDING_STEP_KEYS
from integrations.domain.sending.settings import StepSendingRules, parse_step_rules
from workflows.domain.validation import Reader

MAX_STEPS = 200
END = "$end"  # a `next` that ends the run
ENDED_BY_STEP = "ended by step"
STEP_KEY = re.compile(r"[a-z0-9_]{1,64}")
MAX_STEP_NAME = 200
MAX_WAIT_SECONDS = 366 * 24 * 3600
MAX_ATTEMPTS_LIMIT = 20
MAX_BASE_DELAY = 3600.0  # the default WORKFLOW_STEP_MAX_DELAY: a longer base would be cut to the cap unsaid
_DURATION = re.compile(
    r"\s*(?:(?P<w>\d+)\s*w(?:eeks?)?)?\s*(?:(?P<d>\d+)\s*d(?:ays?)?)?\s*(?:(?P<h>\d+)\s*h(?:ours?)?)?"
    r"\s*(?:(?P<m>\d+)\s*m(?:in(?:ute)?s?)?)?\s*(?:(?P<s>\d+(?:\.\d+)?)\s*s(?:ec(?:ond)?s?)?)?\s*",
    re.IGNORECASE,
)
_UNIT_SECONDS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}

RETRY_KEYS = ("max_attempts", "base_delay")


class WaitClock(StrEnum):
    """Whose clock a step's date or time of day is read on (an IANA name may be given instead)."""

    CONTACT = "contact"  # the contact's own zone, else its phone number's, else the account's
    ACCOUNT = "account"


@dataclass(frozen=True)
class RetryOverrides:
    max_attempts: int | None = None
    base_delay: float | None = None


def parse_retry_overrides(reader: Reader) -> RetryOverrides:
    attempts = reader.number("max_attempts", minimum=1, maximum=MAX_ATTEMPTS_LIMIT, integer=True)
    base_delay = reader.number("base_delay", minimum=0, maximum=MAX_BASE_DELAY)
    return RetryOverrides(
        max_attempts=int(attempts) if attempts is not None else None,
        base_delay=float(base_delay) if base_delay is not None else None,
    )


# --- a send step's overrides of the sending rules ------------------------------------------------
# A send step may override the sending rules for its message (integrations.domain.sending.settings, STEP_KEYS):
# `purpose`, `send_window` (a preset, a window, or null: none), `frequency_caps` (a list; [] none), `when_capped`.
def sending_overrides(r: Reader) -> StepSendingRules:
    """A send step's overrides of the sending rules, every problem by its path (steps[2].config.send_window)."""
    problems = Problems()
    raw = {key: r.get(key) for key in SENDING_STEP_KEYS if key in r.raw}
    found = parse_step_rules(raw, r.path, problems)
    for problem in problems:
        r.error(problem.path, problem.reason)
    return found


# --- URLs -----------------------------------------------------------------------------------------
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


# --- durations and times --------------------------------------------------------------------------
def duration_seconds(r: Reader, value: Any, key: str = "duration") -> float | None:
    """A duration at `key` (seconds, or a text like "2d 12h") of at most MAX_WAIT_SECONDS, else None (an error)."""
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


# --- where a deciding step sends the run ----------------------------------------------------------
def target(r: Reader, key: str) -> str:
    """A step key (that it names a step is the graph's check) or END."""
    return check_target(r, r.get(key), r.at(key))


def item_target(r: Reader, item: Mapping[str, Any], path: str) -> str:
    return check_target(r, item.get("next"), f"{path}.next")


def check_target(r: Reader, value: Any, path: str) -> str:
    if value is None or value == "":
        r.error(path, f'is required: a step key, or "{END}" to end the run')
        return ""
    if not isinstance(value, str) or not (value == END or STEP_KEY.fullmatch(value)):
        r.error(path, f'must be a step key (a-z, 0-9, _; at most 64) or "{END}"')
        return ""
    return value


def items(r: Reader, key: str, *, minimum: int, maximum: int) -> list[tuple[str, Mapping[str, Any]]]:
    """The objects of the list at `key` (a branch's branches, a split's paths), each with its path."""
    raw = r.get(key)
    path = r.at(key)
    if not isinstance(raw, list) or len(raw) < minimum:
        r.error(path, f"must be a list of at least {minimum}")
        return []
    if len(raw) > maximum:
        r.error(path, f"must have at most {maximum} entries")
        return []
    found = []
    for index, item in enumerate(raw):
        item_path = f"{path}[{index}]"
        if not isinstance(item, Mapping):
            r.error(item_path, "must be an object")
            continue
        found.append((item_path, item))
    return found


def item_name(r: Reader, item: Mapping[str, Any], path: str, index: int, names: set[str]) -> str:
    """A path's name, unique in its step ("A", "B" ... when none is given)."""
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
