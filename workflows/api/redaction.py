"""What a workflow response may show of its steps: never a credential.

A webhook step is where credentials live: a token in the URL's path or query
(Slack- and Zapier-style hook URLs), an `Authorization` header, an API key in
the body. Any member who may view workflows reads them over the API, so a
response shows the URL cut to scheme and host (`https://hooks.example.com/…`),
header values other than Content-Type/Accept/User-Agent as `[redacted]`, and
in the body every value under a secret-looking key (`api_key`, `token`,
`auth*` ...) as `[redacted]`, with credentials and URLs inside texts cut as in
logs. Other actions hold message texts and settings, shown as they are.

Round trips work: a client may send back what it read (a GET, a change, a
PUT). A hidden value sent back unchanged means "keep the stored one", taken
from the draft step at the same position if it is a webhook step too. A
`[redacted]` header with nothing stored to keep is refused, never saved.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from integrations.domain.redaction import HARMLESS_HEADERS, REDACTED, is_secret_key, redact
from workflows.domain.actions import ActionType
from workflows.domain.errors import FieldError

WEBHOOK = ActionType.WEBHOOK.value
CUT = "…"


def shown_steps(steps: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [shown_step(step) for step in steps]


def shown_step(step: Mapping[str, Any]) -> dict[str, Any]:
    shown = {"name": step.get("name", ""), "action_type": step.get("action_type"), "config": step.get("config") or {}}
    if shown["action_type"] != WEBHOOK or not isinstance(shown["config"], Mapping):
        return shown
    config = dict(shown["config"])
    if isinstance(config.get("url"), str):
        config["url"] = shown_url(config["url"])
    if isinstance(config.get("headers"), Mapping):
        config["headers"] = {name: shown_header(name, value) for name, value in config["headers"].items()}
    if "body" in config:
        config["body"] = shown_json(config["body"])
    shown["config"] = config
    return shown


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


def restore_hidden(steps: Any, stored: list[Mapping[str, Any]]) -> tuple[Any, list[FieldError]]:
    """`steps` from a client with every hidden value sent back unchanged replaced by the stored one.

    Returns the steps and the placeholders that had nothing to stand for (to refuse, naming each path).
    Anything that is not a list of objects is returned as it is: the workflow service names what is wrong.
    """
    if not isinstance(steps, list):
        return steps, []
    restored: list[Any] = []
    unresolved: list[FieldError] = []
    for index, step in enumerate(steps):
        if (
            not isinstance(step, Mapping)
            or step.get("action_type") != WEBHOOK
            or not isinstance(step.get("config"), Mapping)
        ):
            restored.append(step)
            continue
        before = stored[index] if index < len(stored) else None
        before_config = before.get("config") if before and before.get("action_type") == WEBHOOK else None
        config = _restore_config(dict(step["config"]), before_config if isinstance(before_config, Mapping) else {})
        for name, value in (config.get("headers") or {}).items() if isinstance(config.get("headers"), Mapping) else ():
            if value == REDACTED:
                unresolved.append(
                    FieldError(
                        f"steps[{index}].config.headers.{name}",
                        f"is the placeholder {REDACTED} shown for a hidden value, and this step has no stored "
                        "value to keep; send the value itself",
                    )
                )
        restored.append({**step, "config": config})
    return restored, unresolved


def _restore_config(config: dict[str, Any], before: Mapping[str, Any]) -> dict[str, Any]:
    url = before.get("url")
    if isinstance(url, str) and config.get("url") == shown_url(url):
        config["url"] = url
    stored_headers = before.get("headers") if isinstance(before.get("headers"), Mapping) else {}
    headers = config.get("headers")
    if isinstance(headers, Mapping):
        config["headers"] = {
            name: stored_headers[name] if value == REDACTED and name in stored_headers else value
            for name, value in headers.items()
        }
    if "body" in before and "body" in config and config["body"] == shown_json(before["body"]):
        config["body"] = before["body"]
    return config
