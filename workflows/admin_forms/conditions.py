"""What a condition row offers a marketer: the fields it may test and the operators, in plain words.

One vocabulary for every condition row of the builder (a trigger's contact filter, a branch, a goal, a
wait's match on a custom event). The rule of each operator is the domain's condition language
(CONTRACT: `{"field", "op", "value"}`); this module only says how each is offered: its label and the
kind of value it takes, so the row shows a fitting input (none, a number, a list, a date, text).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from workflows.admin_forms.context import CONTACT_FIELD_LABELS, BuilderContext, StepRef

# op -> (label, the kind of value it takes: "text", "none", "number", "list", "date")
OPERATORS: dict[str, tuple[str, str]] = {
    "equals": ("is", "text"),
    "not_equals": ("is not", "text"),
    "contains": ("contains", "text"),
    "not_contains": ("does not contain", "text"),
    "is_set": ("is set", "none"),
    "is_not_set": ("is empty", "none"),
    "exists": ("exists", "none"),
    "not_exists": ("does not exist", "none"),
    "greater_than": ("is more than", "number"),
    "greater_or_equal": ("is at least", "number"),
    "less_than": ("is less than", "number"),
    "less_or_equal": ("is at most", "number"),
    "in": ("is one of", "list"),
    "not_in": ("is none of", "list"),
    "before": ("is before", "date"),
    "after": ("is after", "date"),
}
# Fields whose value is yes or no: their rows read "true"/"false" as booleans.
CONSENT_FIELDS = (("unsubscribed", "Unsubscribed from email"), ("sms_opted_out", "Opted out of SMS and calls"))
EARLIER_STEPS = "Steps' results"
# A field option ending in "." takes a path the marketer types after it (trigger.plan, steps.api.body.plan).
PATH_SUFFIX = "."


def operator_choices(ops: Iterable[str] | None = None) -> list[tuple[str, str, str]]:
    """(op, label, value kind) for the operators offered, in the table's order."""
    wanted = set(ops) if ops is not None else None
    return [(op, label, kind) for op, (label, kind) in OPERATORS.items() if wanted is None or op in wanted]


def _result_fields(action_type: str) -> tuple[tuple[str, str, bool], ...]:
    from workflows.admin_forms.steps import STEP_FORMS  # the forms import this module

    return STEP_FORMS[action_type].result_fields if action_type in STEP_FORMS else ()


def step_result_fields(step: StepRef) -> list[tuple[str, str]]:
    """What an earlier step's result offers to a condition (CONTRACT: `steps.<key>.<path>`): its type's form says."""
    base = f"steps.{step.key}"
    return [(f"{base}{suffix}", f"{step.label}: {words}") for suffix, words, _ in _result_fields(step.action_type)]


def boolean_results() -> tuple[str, ...]:
    """The suffixes of step results that are yes or no (`.opened`, `.clicked`), from every step type's form."""
    from workflows.admin_forms.steps import STEP_FORMS

    return tuple(
        dict.fromkeys(suffix for form in STEP_FORMS.values() for suffix, _, yes_no in form.result_fields if yes_no)
    )


def is_boolean_field(field: str) -> bool:
    return field in dict(CONSENT_FIELDS) or (field.startswith("steps.") and field.endswith(boolean_results()))


def condition_fields(
    builder: BuilderContext,
    *,
    earlier_steps: Sequence[StepRef] | None = None,
    trigger_data: bool = True,
    event_data: bool = False,
    steps_group: bool = True,
) -> list[tuple[str, list[tuple[str, str]]]]:
    """The field select's groups. The earlier steps' group is refilled in the browser as steps change
    (`data-earlier-steps`); the server fills it for the page as it loads."""
    contact = [(name, CONTACT_FIELD_LABELS[name]) for name in ("email", "phone", "first_name", "last_name", "tags")]
    groups: list[tuple[str, list[tuple[str, str]]]] = [("Contact", contact), ("Consent", list(CONSENT_FIELDS))]
    custom = [(f"custom_fields.{name}", name) for name in builder.custom_fields]
    groups.append(("Custom fields", [*custom, ("custom_fields.", "Another custom field…")]))
    if event_data:
        groups.append(("The event", [("event.", "Event data…")]))
    if trigger_data:
        groups.append(("Trigger data", [("trigger.", "Trigger data…")]))
    if steps_group:
        steps = builder.steps if earlier_steps is None else earlier_steps
        groups.append((EARLIER_STEPS, [option for step in steps for option in step_result_fields(step)]))
    return groups
