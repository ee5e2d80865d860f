"""Lookups that find nothing. Another account's object is not found, exactly as a missing one (HTTP 404)."""

from typing import Any


class NotFound(LookupError):
    what = "object"

    def __init__(self, key: Any) -> None:
        super().__init__(f"no {self.what} with id {key}")
        self.key = key


class WorkflowNotFound(NotFound):
    what = "workflow"


class ExecutionNotFound(NotFound):
    what = "run"


class ContactNotFound(NotFound):
    what = "contact"
