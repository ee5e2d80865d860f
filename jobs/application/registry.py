"""Handlers register by name; the queue never imports the apps that use it.

    @job_handler("send_digest")
    def send_digest(payload: dict, job: JobContext) -> None: ...

Apps import their handler modules in AppConfig.ready(), so the web process
(which enqueues) and the worker (which runs) know the same names. Extra
modules listed in JOB_HANDLER_MODULES are imported when the jobs app loads.

A handler whose jobs stand for something else's progress (a workflow run)
may also register a dead-letter hook, told when one of its jobs ends for good
without completing (dead or failed), so it can settle what the job held:

    @on_dead_letter("send_digest")
    def digest_gave_up(letter: DeadLetter) -> None: ...

A handler whose jobs are many and short may also register a batch handler: the
worker then gives it the jobs of that handler it claimed together, so it can
settle them in one transaction (see `batch_handler`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

if TYPE_CHECKING:
    from jobs.application.context import JobContext

Handler = Callable[[dict[str, Any], "JobContext"], Any]

_handlers: dict[str, Handler] = {}


@dataclass(frozen=True)
class DeadLetter:
    """A job that ended for good without completing: it will not run again unless an operator retries it."""

    id: UUID
    handler: str
    payload: dict[str, Any]
    status: str  # "dead" or "failed"
    error: str  # the stored error (`Type: message`, already safe to keep)


DeadLetterHook = Callable[[DeadLetter], None]
_dead_letter_hooks: dict[str, DeadLetterHook] = {}

BatchItem = tuple[dict[str, Any], "JobContext"]
BatchHandler = Callable[[Sequence[BatchItem]], Sequence[BatchItem]]
_batch_handlers: dict[str, BatchHandler] = {}


class UnknownHandler(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"no job handler named {name!r} is registered; known handlers: {', '.join(sorted(_handlers)) or 'none'}"
        )
        self.name = name


def job_handler(name: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler for jobs named `name`."""
    if not name or len(name) > 200:
        raise ValueError("a handler name must have 1 to 200 characters")

    def register(func: Handler) -> Handler:
        existing = _handlers.get(name)
        if existing is not None and existing is not func and _qualname(existing) != _qualname(func):
            raise ValueError(f"job handler {name!r} is already registered by {_qualname(existing)}")
        _handlers[name] = func
        return func

    return register


def _qualname(func: Callable[..., Any]) -> str:
    return f"{func.__module__}.{func.__qualname__}"


def get_handler(name: str) -> Handler:
    try:
        return _handlers[name]
    except KeyError:
        raise UnknownHandler(name) from None


def is_registered(name: str) -> bool:
    return name in _handlers


def registered_names() -> list[str]:
    return sorted(_handlers)


def import_handler_modules(modules: Iterable[str]) -> None:
    for module in modules:
        importlib.import_module(module)


def on_dead_letter(name: str) -> Callable[[DeadLetterHook], DeadLetterHook]:
    """Register the decorated function to be told when a job of handler `name` ends dead or failed."""

    def register(func: DeadLetterHook) -> DeadLetterHook:
        _dead_letter_hooks[name] = func
        return func

    return register


def dead_letter_hook(name: str) -> DeadLetterHook | None:
    return _dead_letter_hooks.get(name)


PayloadCheck = Callable[[dict[str, Any]], dict[str, str]]  # payload -> {key: reason}, empty when fine
_payload_checks: dict[str, PayloadCheck] = {}


def payload_check(name: str) -> Callable[[PayloadCheck], PayloadCheck]:
    """Register the decorated function to check payloads of handler `name` at enqueue: a payload the handler
    cannot run is refused there (InvalidJob naming `payload.<key>`), not discovered by a worker."""

    def register(func: PayloadCheck) -> PayloadCheck:
        _payload_checks[name] = func
        return func

    return register


def get_payload_check(name: str) -> PayloadCheck | None:
    return _payload_checks.get(name)


def batch_handler(name: str) -> Callable[[BatchHandler], BatchHandler]:
    """Register the decorated function to run, together, several claimed jobs of handler `name`.

    It gets (payload, JobContext) pairs and must complete each job it settles with
    `complete_all` (or `JobContext.mark_completed`) inside its own transaction. It
    returns the pairs it left alone; the worker runs those one by one through the
    ordinary handler, which stays the reference behaviour. If it raises, the worker
    rolls back and runs every job whose completion did not commit one by one: a
    batch handler is an optimisation and must never be the only way a job can run.
    """

    def register(func: BatchHandler) -> BatchHandler:
        _batch_handlers[name] = func
        return func

    return register


def get_batch_handler(name: str) -> BatchHandler | None:
    return _batch_handlers.get(name)
