"""Which run's step is running in this thread, so the events it causes know their origin (the chain guard)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from workflows.domain.enrollment import ChainOrigin

_origin: ContextVar[ChainOrigin | None] = ContextVar("workflow_chain_origin", default=None)


def current_origin() -> ChainOrigin | None:
    return _origin.get()


@contextmanager
def caused_by(origin: ChainOrigin) -> Iterator[None]:
    """Events published inside this block (contacts services run subscribers inline) come from `origin`."""
    token = _origin.set(origin)
    try:
        yield
    finally:
        _origin.reset(token)
