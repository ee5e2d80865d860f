"""Turning stored workflows and versions into checked domain definitions.

Versions never change once published, so each worker keeps the ones it has
read in a small in-process cache: a step costs no query for its definition.

A published version was checked when it was published; loading it for a run
only reads it (`frozen_context`): no template is compiled and no rule added
since (a contact field no longer editable, a template check made stricter)
refuses it. Otherwise a rule tightened after publishing would make every
event for the account fail to start, or strand runs in flight; a value that
is bad at run time fails its own step when it renders.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from contacts.application.services import EDITABLE_FIELDS
from integrations.application import channels
from workflows.domain.validation import ValidationContext
from workflows.domain.workflow import WorkflowDefinition, parse_definition
from workflows.infrastructure.models import WorkflowVersion
from workflows.infrastructure.templates import renderer

VERSION_CACHE_SIZE = 1024


def validation_context(*, known_events: frozenset[str] | None = None) -> ValidationContext:
    """What a save checks: templates compile and name only what exists, webhook hosts pass the SSRF guard,
    a contact.updated wait watches a field that event reports, and (when `known_events` is given, as the
    admin does) an event trigger names an event Relay knows."""
    return ValidationContext(
        check_template=renderer.check,
        contact_fields=frozenset(EDITABLE_FIELDS),
        template_variables=renderer.variables,
        check_webhook_target=channels.webhook_target_problem,
        known_events=known_events,
        check_watched_fields=True,
    )


def _accept_template(_text: str) -> str | None:
    return None  # compiled (and cached) when rendered; checked at save and publish


def frozen_context(steps: Any) -> ValidationContext:
    """What reading a published version needs: no template check, and the contact fields it names allowed."""
    named: set[str] = set()
    if isinstance(steps, list):
        for step in steps:
            config = step.get("config") if isinstance(step, dict) else None
            fields = config.get("fields") if isinstance(config, dict) else None
            if isinstance(fields, dict):
                named.update(str(name) for name in fields)
    return ValidationContext(check_template=_accept_template, contact_fields=frozenset(EDITABLE_FIELDS) | named)


def definition_from(
    *,
    trigger: Any,
    reenrollment: Any,
    steps: Any,
    require_steps: bool = True,
    known_events: frozenset[str] | None = None,
    goals: Any = None,
) -> WorkflowDefinition:
    """Check a workflow's parts; WorkflowValidationError lists every problem with its path."""
    return parse_definition(
        trigger=trigger,
        reenrollment=reenrollment,
        steps=steps,
        context=validation_context(known_events=known_events),
        require_steps=require_steps,
        goals=goals,
    )


@dataclass(frozen=True)
class LoadedVersion:
    id: UUID
    number: int
    workflow_id: int
    workflow_name: str
    definition: WorkflowDefinition


_cache: OrderedDict[UUID, LoadedVersion] = OrderedDict()
_lock = threading.Lock()


def load_version(version_id: UUID) -> LoadedVersion:
    with _lock:
        cached = _cache.get(version_id)
        if cached is not None:
            _cache.move_to_end(version_id)
            return cached
    row = (
        WorkflowVersion.objects.filter(pk=version_id)
        .values(
            "id",
            "number",
            "workflow_id",
            "workflow__name",
            "trigger_type",
            "trigger_event",
            "trigger_tag",
            "trigger_filter",
            "reenrollment",
            "steps",
            "goals",
        )
        .get()
    )
    loaded = version_from_row(row)
    with _lock:
        _cache[version_id] = loaded
        while len(_cache) > VERSION_CACHE_SIZE:
            _cache.popitem(last=False)
    return loaded


def version_from_row(row: Mapping[str, Any]) -> LoadedVersion:
    """A published version, read without re-validation (see the module docstring)."""
    definition = parse_definition(
        trigger={
            "type": row["trigger_type"],
            "event": row["trigger_event"],
            "tag": row["trigger_tag"],
            "filter": row["trigger_filter"],
        },
        reenrollment=row["reenrollment"],
        steps=row["steps"],
        context=frozen_context(row["steps"]),
        goals=row.get("goals") or [],
    )
    return LoadedVersion(
        id=row["id"],
        number=row["number"],
        workflow_id=row["workflow_id"],
        workflow_name=row["workflow__name"],
        definition=definition,
    )
