"""What a workflow response may show of its steps: never a credential.

A webhook step is where credentials live: a token in the URL's path or query
(Slack- and Zapier-style hook URLs), an `Authorization` header, an API key in
the body. Any member who may view workflows reads them over the API, so a
response shows the URL cut to scheme and host (`https://hooks.example.com/…`),
header values other than Content-Type/Accept/User-Agent as `[redacted]`, and
in the body every value under a secret-looking key (`api_key`, `token`,
`auth*` ...) as `[redacted]`, with credentials and URLs inside texts cut as in
logs. A voice call's `recording_url` is cut the same way as a webhook URL (a
presigned media URL carries its signature in the query). Other actions hold
message texts and settings, shown as they are.

Round trips work: a client may send back what it read (a GET, a change, a
PUT). A hidden value sent back unchanged means "keep the stored one", taken
from the draft step at the same position if it is a webhook step too (a body
is matched key by key, so editing one of its values keeps the hidden others).
A placeholder with nothing stored behind it (`[redacted]`, or a URL cut to
`https://host/…`) is refused naming its path, never saved. Hidden headers and
body values are kept only while the URL's origin (scheme, host, port) stays the
same: otherwise a client who may edit but never read them could send the stored
secrets to a host of its choosing, so each one must be entered again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from integrations.domain.redaction import HARMLESS_HEADERS, REDACTED, is_secret_key, redact
from workflows.domain.errors import FieldError
from workflows.domain.step_types import StepConfigType, config_type, step_type_names

CUT = "…"


def shown_steps(steps: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [shown_step(step) for step in steps]


def shown_step(step: Mapping[str, Any]) -> dict[str, Any]:
    shown = {"name": step.get("name", ""), "action_type": step.get("action_type"), "config": step.get("config") or {}}
    if step.get("key"):
        shown = {"key": step["key"], **shown}
    if step.get("next"):
        shown["next"] = step["next"]
    hide = _hiding(shown["action_type"])
    if hide is not None and hide.shown is not None and isinstance(shown["config"], Mapping):
        shown["config"] = hide.shown(shown["config"])
    return shown


def _hiding(action_type: Any) -> StepConfigType | None:
    """The step type whose config holds values a response hides (a webhook's, a voice call's), else None."""
    if not isinstance(action_type, str) or action_type not in step_type_names():
        return None
    found = config_type(action_type)
    return found if found.shown is not None else None


def shown_url(url: str) -> str:
    """Scheme and host: what follows (and any user:password@) may be a token. Templates may follow the host only."""
    fixed = url.split("{", 1)[0]
    scheme, separator, rest = fixed.partition("://")
    if not separator:
        return CUT
    host = rest
    for mark in "/?#":
        host = host.split(mark, 1)[0]
    host = host.rsplit("@", 1)[-1]
    shown = f"{scheme}://{host}"
    return url if url in (shown, f"{shown}/") else f"{shown}/{CUT}"


def shown_header(name: str, value: Any) -> Any:
    return value if str(name).lower() in HARMLESS_HEADERS else REDACTED


def shown_json(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {
            key: REDACTED if is_secret_key(str(key)) and item is not None else shown_json(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [shown_json(item) for item in value]
    return value


def shown_context(context: Mapping[str, Any] | None) -> dict[str, Any]:
    """A run's context as its history may show it: everything but its steps' outputs, which hold answers as the
    receivers sent them (what conditions read); each step's result is shown, redacted, with its attempt."""
    shown = {key: value for key, value in (context or {}).items() if key != "steps"}
    outputs = (context or {}).get("steps")
    if isinstance(outputs, list):
        shown["steps"] = f"{len(outputs)} step results, shown redacted with each attempt"
    return shown


ANSWER_PARTS = frozenset({"body", "json", "headers"})  # what of a step's result is a receiver's answer


def answer_step(field: str) -> str | None:
    """The step key whose answer a condition field reads (`steps.call_api.body.plan` -> `call_api`), else None.

    Conditions read a step's answer as the receiver sent it; where a field's value is shown (a decision's
    values), it must be shown as that step's log row shows the answer (docs/decisions/secrets-and-step-output.md).
    """
    root, _, rest = field.partition(".")
    key, _, inner = rest.partition(".")
    if root != "steps" or not key:
        return None
    return key if inner.split(".", 1)[0] in ANSWER_PARTS else None


def restore_hidden(steps: Any, stored: list[Mapping[str, Any]]) -> tuple[Any, list[FieldError]]:
    """`steps` from a client with every hidden value sent back unchanged replaced by the stored one.

    Returns the steps and the placeholders that had nothing to stand for (to refuse, naming each path).
    Anything that is not a list of objects is returned as it is: the workflow service names what is wrong.
    Each step type that hides values says how its config is restored (`StepConfigType.restore`), from the
    stored step at the same position when it is of the same type.
    """
    if not isinstance(steps, list):
        return steps, []
    restored: list[Any] = []
    unresolved: list[FieldError] = []
    for index, step in enumerate(steps):
        hide = _hiding(step.get("action_type")) if isinstance(step, Mapping) else None
        if hide is None or hide.restore is None or not isinstance(step.get("config"), Mapping):
            restored.append(step)
            continue
        before = stored[index] if index < len(stored) else None
        before_config = before.get("config") if before and before.get("action_type") == hide.name else None
        config, problems = hide.restore(
            dict(step["config"]),
            before_config if isinstance(before_config, Mapping) else None,
            f"steps[{index}].config",
        )
        unresolved.extend(problems)
        restored.append({**step, "config": config})
    return restored, unresolved


def origin(url: Any) -> tuple[str, str, int] | None:
    """(scheme, host, port) of the fixed part of a URL (templates may follow the host only); None if there is none."""
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url.split("{", 1)[0].strip())
        scheme, host, port = parts.scheme.lower(), parts.hostname, parts.port
    except ValueError:
        return None
    if not scheme or not host:
        return None
    return scheme, host.rstrip("."), port or {"http": 80, "https": 443}.get(scheme, 0)


def restore_json(sent: Any, stored: Any) -> Any:
    """Parts of a body sent back as shown become the stored parts again; edited parts are taken as sent."""
    if sent == shown_json(stored):
        return stored
    if isinstance(sent, Mapping) and isinstance(stored, Mapping):
        return {
            key: (
                stored[key]
                if sent_value == REDACTED and is_secret_key(str(key)) and stored.get(key) is not None
                else restore_json(sent_value, stored[key])
            )
            if key in stored
            else sent_value
            for key, sent_value in sent.items()
        }
    if isinstance(sent, list) and isinstance(stored, list):
        return [restore_json(item, stored[i]) if i < len(stored) else item for i, item in enumerate(sent)]
    return sent


NO_STORED_VALUE = "this step has no stored value to keep; send the value itself"


def json_placeholders(value: Any, path: str) -> list[FieldError]:
    if value == REDACTED:
        return [FieldError(path, f"is the placeholder {REDACTED}, and {NO_STORED_VALUE}")]
    if isinstance(value, Mapping):
        return [e for key, item in value.items() for e in json_placeholders(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [e for i, item in enumerate(value) for e in json_placeholders(item, f"{path}[{i}]")]
    return []
