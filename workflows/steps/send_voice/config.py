"""A voice call to the contact's phone: a message read aloud or a recording played, and the sending rules'
overrides. Its `recording_url` is shown cut to its host (a presigned media URL carries its signature)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from integrations.domain.sending.message import Channel
from integrations.domain.sending.settings import STEP_KEYS as SENDING_STEP_KEYS
from integrations.domain.sending.settings import StepSendingRules
from workflows.domain.actions import http_url_problem, sending_overrides
from workflows.domain.errors import FieldError
from workflows.domain.redaction import CUT, NO_STORED_VALUE, shown_url
from workflows.domain.step_types import StepConfigType
from workflows.domain.validation import Reader


@dataclass(frozen=True)
class SendVoiceConfig:
    message: str | None = None
    recording_url: str | None = None
    sending: StepSendingRules = field(default_factory=StepSendingRules)


def parse(r: Reader) -> SendVoiceConfig:
    message = r.template("message", max_length=4000)
    recording_url = r.string("recording_url", max_length=2000)
    if (message is None) == (recording_url is None) and not any(e.path.startswith(r.path) for e in r.errors):
        r.error(r.path, "needs exactly one of `message` (text read to the contact) or `recording_url`")
    if recording_url is not None:
        reason = http_url_problem(recording_url)
        if reason:
            r.error(r.at("recording_url"), reason)
    return SendVoiceConfig(message=message, recording_url=recording_url, sending=sending_overrides(r))


def shown(config: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(config.get("recording_url"), str):
        return {**config, "recording_url": shown_url(config["recording_url"])}
    return dict(config)


def restore(
    config: dict[str, Any], before: Mapping[str, Any] | None, path: str
) -> tuple[dict[str, Any], list[FieldError]]:
    """A recording URL sent back as shown becomes the stored one again (same position, same action)."""
    before_url = (before or {}).get("recording_url")
    url = config.get("recording_url")
    if isinstance(before_url, str) and url == shown_url(before_url):
        config["recording_url"] = before_url
    elif isinstance(url, str) and url.endswith(f"/{CUT}") and shown_url(url) == url:
        reason = f"is the shortened URL shown in place of a hidden one, and {NO_STORED_VALUE}"
        return config, [FieldError(f"{path}.recording_url", reason)]
    return config, []


CONFIG = StepConfigType(
    name="send_voice",
    channel=Channel.VOICE,
    keys=("message", "recording_url", *SENDING_STEP_KEYS),
    parse=parse,
    shown=shown,
    restore=restore,
)
