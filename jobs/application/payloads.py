"""Reading a job's payload: a payload that is malformed for its handler fails at once, naming the key.

Retrying a job whose payload lacks a key, or holds a value of the wrong type, would fail the same way
every time until it ended dead. The worker hands every handler its payload as a `Payload`, on which a
missing key raises `MissingPayloadKey` (a KeyError and a PermanentError), and handlers check types with
`require` / `require_uuid`; both are permanent failures whose stored error names the key.
"""

from __future__ import annotations

from typing import Any, Literal, overload
from uuid import UUID

from kernel.failures import PermanentError


class InvalidPayload(PermanentError):
    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"payload.{key}: {reason}")
        self.key = key


class MissingPayloadKey(InvalidPayload, KeyError):
    def __init__(self, key: str) -> None:
        super().__init__(str(key), "is missing")

    __str__ = Exception.__str__  # not KeyError's repr of the message


class Payload(dict):
    """A job's payload as a handler receives it: `payload["key"]` of a missing key is a permanent failure."""

    __slots__ = ()

    def __missing__(self, key: str) -> Any:
        raise MissingPayloadKey(key)


_KINDS = {int: "an integer", str: "a string", dict: "an object", list: "a list", bool: "true or false"}


def require(payload: dict[str, Any], key: str, kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
    """payload[key], checked to be of `kind` (bool is not an int here); InvalidPayload names the key."""
    if key not in payload or (optional and payload[key] is None):
        if optional:
            return None
        raise MissingPayloadKey(key)
    value = payload[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if (isinstance(value, bool) and int in kinds and bool not in kinds) or not isinstance(value, kinds):
        wanted = " or ".join(_KINDS.get(k, k.__name__) for k in kinds)
        raise InvalidPayload(key, f"must be {wanted}, not {type(value).__name__}")
    return value


@overload
def require_uuid(payload: dict[str, Any], key: str, *, optional: Literal[False] = False) -> UUID: ...
@overload
def require_uuid(payload: dict[str, Any], key: str, *, optional: bool) -> UUID | None: ...
def require_uuid(payload: dict[str, Any], key: str, *, optional: bool = False) -> UUID | None:
    value = require(payload, key, str, optional=optional)
    if value is None:
        return None
    try:
        return UUID(value)
    except ValueError:
        raise InvalidPayload(key, "must be a UUID") from None
