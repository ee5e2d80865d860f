"""Goals: conditions that, once an enrolled contact meets them, end its run (or move it to a step).

`goals: [{"name": "Bought", "conditions": [COND, ...], "then": "$end"}]` on a
workflow (its draft, frozen in each version). A goal is judged when an event
happens to the contact (a tag added, a field changed, an email clicked, a
custom event), over the contact, the run's trigger data and that event
(`event.<path>`, with `event.name` its name): the one condition language.
The first goal of the list whose conditions all hold is the one met. Met,
the run ends COMPLETED with the reason "goal met: <name>" wherever it is, or
goes to the step `then` names; a step in flight finishes, nothing after it
starts.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workflows.domain.actions import END, STEP_KEY
from workflows.domain.conditions import EVENT_ROOTS, Condition, Facts, parse_conditions
from workflows.domain.errors import FieldError

MAX_GOALS = 20
MAX_GOAL_NAME = 100
GOAL_KEYS = ("name", "conditions", "then")
GOAL_ROOTS = frozenset(EVENT_ROOTS - {"steps"})  # judged outside any step: the contact, the trigger, the event


@dataclass(frozen=True)
class Goal:
    name: str
    conditions: tuple[Condition, ...]
    then: str = END  # END: the run completes; else the key of the step it goes to

    def met(self, facts: Facts) -> bool:
        return all(condition.matches(facts) for condition in self.conditions)

    @property
    def reason(self) -> str:
        return f"goal met: {self.name}"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "conditions": [c.as_dict() for c in self.conditions], "then": self.then}


def event_facts(name: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """What `event.<path>` reads: the event's data, and its name as `event.name`."""
    return {**data, "name": name}


def first_met(goals: Sequence[Goal], facts: Facts) -> Goal | None:
    return next((goal for goal in goals if goal.met(facts)), None)


def parse_goals(
    raw: Any, errors: list[FieldError], *, step_keys: Collection[str], path: str = "goals"
) -> tuple[Goal, ...]:
    """The goals at `path`; every problem goes to `errors` with its path (then do not use the result)."""
    if raw is None or raw == []:
        return ()
    if not isinstance(raw, list):
        errors.append(FieldError(path, "must be a list of goals"))
        return ()
    if len(raw) > MAX_GOALS:
        errors.append(FieldError(path, f"must have at most {MAX_GOALS} goals"))
        return ()
    goals: list[Goal] = []
    names: set[str] = set()
    for index, item in enumerate(raw):
        at = f"{path}[{index}]"
        if not isinstance(item, Mapping):
            errors.append(FieldError(at, "must be an object with name, conditions and then"))
            continue
        before = len(errors)
        for key in item:
            if key not in GOAL_KEYS:
                errors.append(FieldError(f"{at}.{key}", f"is not a known setting; expected {', '.join(GOAL_KEYS)}"))
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            errors.append(FieldError(f"{at}.name", "is required"))
        elif len(name.strip()) > MAX_GOAL_NAME:
            errors.append(FieldError(f"{at}.name", f"must be at most {MAX_GOAL_NAME} characters"))
        elif name.strip() in names:
            errors.append(FieldError(f"{at}.name", "another goal has this name"))
        conditions = parse_conditions(
            item.get("conditions"), f"{at}.conditions", errors, roots=GOAL_ROOTS, allow_empty=False
        )
        then = item.get("then", END)
        if then is None:
            then = END
        if not isinstance(then, str) or not (then == END or STEP_KEY.fullmatch(then)):
            errors.append(FieldError(f"{at}.then", f'must be "{END}" or the key of a step of this workflow'))
        elif then != END and then not in step_keys:
            errors.append(FieldError(f"{at}.then", f"names no step of this workflow ({then!r})"))
        if len(errors) == before and isinstance(name, str) and isinstance(then, str):
            names.add(name.strip())
            goals.append(Goal(name=name.strip(), conditions=tuple(conditions), then=then))
    return tuple(goals)
