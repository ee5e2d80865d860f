"""A workflow's steps as a graph: the checks that make every run end, and the cap on loops.

Each step leads to the steps its `next` and its config name (a branch's
branches and default, a split's paths, a wait for an event's timeout path).
A workflow is refused, with the path of the problem, when:

- a `next` names no step;
- a step cannot be reached from the first one;
- a step can never reach the end (every way on from it loops back);
- a loop never passes a wait (`wait`, `wait_for_event`): it would spin through
  steps as fast as the workers go;
- a condition reads `steps.<key>` of a step the workflow does not have.

A loop that does wait is allowed, and capped at run time: a run visits at
most MAX_STEP_VISITS steps (`Execution`), then fails with a clear reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from workflows.domain.actions import END
from workflows.domain.errors import FieldError
from workflows.domain.step_types import config_type

if TYPE_CHECKING:
    from workflows.domain.workflow import Step


def exits(step: Step, path: str) -> list[tuple[str, str]]:
    """(field path, target key or END) for every way on from `step`."""
    here = f"{path}[{step.index}]"
    kind = config_type(step.action_type)
    found = kind.exits(step.config, here)
    return found if kind.decides else [(f"{here}.next", step.next), *found]


def check_graph(
    steps: Sequence[Step], path: str, errors: list[FieldError], *, also_entered: Iterable[str] = ()
) -> None:
    """Every target exists, every step is reachable (from the first step, or as a goal's `then`: also_entered),
    every reachable step can end, and every loop waits."""
    if not steps:
        return
    by_key = {step.key: step for step in steps}
    edges: dict[str, list[str]] = {}
    for step in steps:
        targets = []
        for field_path, target in exits(step, path):
            if target != END and target not in by_key:
                errors.append(FieldError(field_path, f"names no step of this workflow: {target!r}"))
            else:
                targets.append(target)
        edges[step.key] = targets
        _check_condition_steps(step, path, by_key, errors)
    if errors:
        return
    reachable = _reach(steps[0].key, edges)
    for entry in also_entered:
        if entry in by_key:
            reachable |= _reach(entry, edges)
    for step in steps:
        if step.key not in reachable:
            errors.append(FieldError(f"{path}[{step.index}]", f"step {step.key!r} is unreachable: no step leads to it"))
    ending = _ending(edges)
    for step in steps:
        if step.key in reachable and step.key not in ending:
            errors.append(
                FieldError(f"{path}[{step.index}]", f"step {step.key!r} never ends: every way on from it loops back")
            )
    waiting = {step.key for step in steps if config_type(step.action_type).waits}
    for key in _in_loop_without_wait(edges, waiting):
        step = by_key[key]
        errors.append(
            FieldError(
                f"{path}[{step.index}]",
                f"step {key!r} is in a loop that never waits: a loop must pass through a wait or wait_for_event step",
            )
        )


def _check_condition_steps(step: Step, path: str, by_key: dict, errors: list[FieldError]) -> None:
    reads = config_type(step.action_type).step_reads
    if reads is None:
        return
    for field_path, field in reads(step.config, f"{path}[{step.index}]"):
        root, _, rest = field.partition(".")
        if root == "steps" and rest.split(".", 1)[0] not in by_key:
            errors.append(FieldError(field_path, f"names no step of this workflow: {rest.split('.', 1)[0]!r}"))


def _reach(start: str, edges: dict[str, list[str]]) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for target in edges.get(todo.pop(), ()):
            if target != END and target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _ending(edges: dict[str, list[str]]) -> set[str]:
    """The steps from which some way leads to the end."""
    back: dict[str, list[str]] = {}
    for source, targets in edges.items():
        for target in targets:
            back.setdefault(target, []).append(source)
    seen: set[str] = set()
    todo = [END]
    while todo:
        for source in back.get(todo.pop(), ()):
            if source not in seen:
                seen.add(source)
                todo.append(source)
    return seen


def _in_loop_without_wait(edges: dict[str, list[str]], waiting: set[str]) -> list[str]:
    """Steps on a cycle made only of steps that do not wait (Tarjan's strongly connected components)."""
    nodes = [key for key in edges if key not in waiting]
    inner = {key: [t for t in edges[key] if t != END and t not in waiting] for key in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[str] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            targets = inner[node]
            if child < len(targets):
                work.append((node, child + 1))
                target = targets[child]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in inner[node]:
                    found.extend(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found
