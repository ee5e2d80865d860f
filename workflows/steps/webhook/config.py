"""An HTTP request to another system, signed by Relay: its method, URL (a fixed scheme and host; templates may
fill in the path), headers, JSON body (every text in it a template; none: Relay's envelope), and the names
whose values it marks secret. The URL, headers and secret body values are shown hidden in responses, and a
round trip keeps them while the URL stays the same (workflows.domain.redaction)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from integrations.domain.channels import header_value_problem
from workflows.domain.actions import http_url_problem
from workflows.domain.errors import FieldError
from workflows.domain.redaction import (
    CUT,
    NO_STORED_VALUE,
    REDACTED,
    json_placeholders,
    restore_json,
    shown_header,
    shown_json,
    shown_url,
)
from workflows.domain.step_types import StepConfigType
from workflows.domain.validation import Reader, is_template

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
MAX_SECRET_NAMES = 50


@dataclass(frozen=True)
class WebhookConfig:
    url: str  # may hold templates; its scheme and host are fixed
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()  # values may hold templates
    body: Any = None  # JSON; every string in it is a template. None: Relay's standard envelope
    # Names of query parameters, headers and body keys whose values are secret besides those that always are
    # (Authorization, token, api_key ...): cut from what the step's log shows of the answer.
    secrets: tuple[str, ...] = ()


def parse(r: Reader) -> WebhookConfig:
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


# --- what a response shows, and what a round trip keeps --------------------------------------------
def shown(config: Mapping[str, Any]) -> dict[str, Any]:
    """The URL cut to its host, header values but harmless ones and secret body values `[redacted]`."""
    found = dict(config)
    if isinstance(found.get("url"), str):
        found["url"] = shown_url(found["url"])
    if isinstance(found.get("headers"), Mapping):
        found["headers"] = {name: shown_header(name, value) for name, value in found["headers"].items()}
    if "body" in found:
        found["body"] = shown_json(found["body"])
    return found


URL_CHANGED = "re-enter this secret: the URL changed, and a hidden value is only kept for the URL it was entered for"


def restore(
    config: dict[str, Any], before: Mapping[str, Any] | None, path: str
) -> tuple[dict[str, Any], list[FieldError]]:
    """Hidden values sent back as shown become the stored ones again, only for the very URL they were entered for;
    what is still a placeholder after that is named, to be refused."""
    stored = before or {}
    config = _restore_config(config, stored)
    if stored and not _same_url(config.get("url"), stored.get("url")):
        return config, [
            FieldError(error.path, URL_CHANGED) if error.path != f"{path}.url" else error
            for error in _placeholders(config, path)
        ]
    return config, _placeholders(config, path)


def _same_url(url: Any, stored_url: Any) -> bool:
    """Hidden values are kept only for the very URL they were entered for: on a shared receiver host
    (webhook.site, hooks.zapier.com ...) another path may well belong to someone else."""
    return isinstance(url, str) and url == stored_url


def _restore_config(config: dict[str, Any], before: Mapping[str, Any]) -> dict[str, Any]:
    url = before.get("url")
    if isinstance(url, str) and config.get("url") == shown_url(url):
        config["url"] = url
    if not _same_url(config.get("url"), url):
        return config  # secrets go to the URL they were entered for, or nowhere: `_placeholders` names them
    headers_before = before.get("headers")
    stored_headers = headers_before if isinstance(headers_before, Mapping) else {}
    headers = config.get("headers")
    if isinstance(headers, Mapping):
        config["headers"] = {
            name: stored_headers[name] if value == REDACTED and name in stored_headers else value
            for name, value in headers.items()
        }
    if "body" in before and "body" in config:
        config["body"] = restore_json(config["body"], before["body"])
    return config


def _placeholders(config: Mapping[str, Any], path: str) -> list[FieldError]:
    """What is still a placeholder after restoring: shown in place of a value that is not there to keep."""
    found: list[FieldError] = []
    url = config.get("url")
    if isinstance(url, str) and url.endswith(f"/{CUT}") and shown_url(url) == url:
        found.append(
            FieldError(f"{path}.url", f"is the shortened URL shown in place of a hidden one, and {NO_STORED_VALUE}")
        )
    headers = config.get("headers")
    if isinstance(headers, Mapping):
        for name, value in headers.items():
            if value == REDACTED:
                found.append(
                    FieldError(f"{path}.headers.{name}", f"is the placeholder {REDACTED}, and {NO_STORED_VALUE}")
                )
    if "body" in config:
        found.extend(json_placeholders(config["body"], f"{path}.body"))
    return found


CONFIG = StepConfigType(
    name="webhook",
    keys=("method", "url", "headers", "body", "secrets"),
    parse=parse,
    shown=shown,
    restore=restore,
)
