"""Any JSON a client sends as a workflow is named as a problem, never a crash (found by schemathesis)."""

import pytest

from workflows.domain.errors import WorkflowValidationError
from workflows.domain.validation import ValidationContext
from workflows.domain.workflow import parse_definition

CONTEXT = ValidationContext(check_template=lambda text: None, contact_fields=frozenset({"first_name"}))


@pytest.mark.parametrize(
    ("trigger", "reenrollment", "path"),
    [
        (
            {"type": "event", "event": "x", "filter": [{"field": "email", "op": {"a": 1}}]},
            "never",
            "trigger.filter[0].op",
        ),
        (
            {"type": "event", "event": "x", "filter": [{"field": ["email"], "op": "is_set"}]},
            "never",
            "trigger.filter[0].field",
        ),
        ({"type": ["event"]}, "never", "trigger.type"),
        ({}, {"rule": "never"}, "reenrollment"),
        ({}, ["never"], "reenrollment"),
    ],
)
def test_unhashable_values_are_named_not_crashed_on(trigger, reenrollment, path):
    with pytest.raises(WorkflowValidationError) as caught:
        parse_definition(trigger=trigger, reenrollment=reenrollment, steps=[], context=CONTEXT, require_steps=False)
    assert path in [e.path for e in caught.value.errors]
