"""The graph of steps: keys, `next`, the new deciding steps' configs, and every check that makes a run end."""

import uuid

import pytest

from workflows.domain.actions import END
from workflows.domain.errors import WorkflowValidationError
from workflows.domain.execution import MAX_STEP_VISITS, Execution, ExecutionStatus, Goto, run_path
from workflows.domain.validation import ValidationContext
from workflows.domain.workflow import parse_steps
from workflows.steps.branch.config import BranchConfig
from workflows.steps.split.config import SplitConfig, split_bucket
from workflows.steps.wait_for_event.config import WaitForEventConfig

CONTEXT = ValidationContext(check_template=lambda _s: None, contact_fields=frozenset({"email", "first_name"}))
TAG = {"action_type": "add_tag", "config": {"tag": "t"}}
WAIT = {"action_type": "wait", "config": {"duration": "1d"}}


def tag(key, **extra):
    return {"key": key, **TAG, **extra}


def errors_of(steps) -> dict[str, list[str]]:
    with pytest.raises(WorkflowValidationError) as info:
        parse_steps(steps, CONTEXT)
    return info.value.as_dict()


def branch(key, branches, default):
    return {"key": key, "action_type": "branch", "config": {"branches": branches, "default": default}}


def test_a_linear_list_without_keys_is_what_it_was():
    steps = parse_steps([TAG, WAIT, TAG], CONTEXT)
    assert [s.key for s in steps] == ["step_1", "step_2", "step_3"]
    assert [s.next for s in steps] == ["step_2", "step_3", END]
    assert [s.goto for s in steps] == [Goto(1, "step_2"), Goto(2, "step_3"), Goto(None, END)]
    assert [s.explicit_next for s in steps] == ["", "", ""]


def test_next_jumps_and_end_ends():
    steps = parse_steps([tag("a", next="c"), tag("b", next="$end"), {"key": "c", **WAIT, "next": "b"}], CONTEXT)
    assert steps[0].goto == Goto(2, "c")
    assert steps[2].goto == Goto(1, "b")
    assert steps[1].goto.ends


def test_unreachable_steps_are_refused():
    assert errors_of([tag("a", next="c"), tag("b"), tag("c")]) == {
        "steps[1]": ["step 'b' is unreachable: no step leads to it"]
    }


def test_a_step_only_a_goal_jumps_to_is_reachable():
    from workflows.domain.workflow import parse_definition

    steps = [tag("a", next="$end"), tag("thanks")]
    goal = {"name": "Bought", "conditions": [{"field": "tags", "op": "contains", "value": "buyer"}], "then": "thanks"}
    trigger = {"type": "manual"}
    definition = parse_definition(trigger=trigger, reenrollment="never", steps=steps, goals=[goal], context=CONTEXT)
    assert [s.key for s in definition.steps] == ["a", "thanks"]
    with pytest.raises(WorkflowValidationError) as refused:  # without the goal, nothing leads to it
        parse_definition(trigger=trigger, reenrollment="never", steps=steps, goals=[], context=CONTEXT)
    assert [e.path for e in refused.value.errors] == ["steps[1]"]


def test_a_next_naming_no_step_is_refused():
    assert errors_of([tag("a", next="nowhere"), tag("b")]) == {
        "steps[0].next": ["names no step of this workflow: 'nowhere'"]
    }


def test_a_branch_naming_a_missing_step_names_its_path():
    errors = errors_of(
        [
            branch(
                "check",
                [
                    {
                        "name": "VIP",
                        "conditions": [{"field": "tags", "op": "contains", "value": "vip"}],
                        "next": "missing",
                    }
                ],
                "b",
            ),
            tag("b"),
        ]
    )
    assert errors == {"steps[0].config.branches[0].next": ["names no step of this workflow: 'missing'"]}


def test_a_split_whose_weights_sum_to_99_is_refused():
    split = {
        "key": "ab",
        "action_type": "split",
        "config": {"paths": [{"name": "A", "weight": 50, "next": "a"}, {"name": "B", "weight": 49, "next": "b"}]},
    }
    assert errors_of([split, tag("a", next="$end"), tag("b")]) == {
        "steps[0].config.paths": ["the weights must sum to 100 (they sum to 99)"]
    }


def test_duplicate_and_malformed_keys():
    assert errors_of([tag("a"), tag("a")]) == {"steps[1].key": ["'a' is also the key of steps[0]"]}
    assert "steps[0].key" in errors_of([tag("Not A Key")])
    # a generated key that collides with an author's key is named too
    assert "steps[1].key" in errors_of([tag("step_2"), TAG])


def test_a_loop_without_a_wait_is_refused_and_one_with_a_wait_is_allowed():
    looping = [
        branch("check", [{"name": "again", "conditions": [{"field": "tags", "op": "is_set"}], "next": "t"}], "$end"),
        tag("t", next="check"),
    ]
    errors = errors_of(looping)
    assert set(errors) == {"steps[0]", "steps[1]"}
    assert "a loop must pass through a wait" in errors["steps[0]"][0]
    waits = [looping[0], tag("t", next="w"), {"key": "w", **WAIT, "next": "check"}]
    steps = parse_steps(waits, CONTEXT)
    assert steps[2].goto == Goto(0, "check")


def test_a_cycle_that_never_ends_is_refused():
    errors = errors_of([tag("a"), {"key": "w", **WAIT, "next": "a"}])
    assert errors == {
        "steps[0]": ["step 'a' never ends: every way on from it loops back"],
        "steps[1]": ["step 'w' never ends: every way on from it loops back"],
    }


def test_deciding_steps_have_no_next_of_their_own():
    errors = errors_of([{"key": "e", "action_type": "end", "config": {}, "next": "x"}])
    assert errors == {
        "steps[0].next": ["a end step chooses where the run goes in its config; it has no `next` of its own"]
    }


def test_at_most_200_steps():
    assert errors_of([TAG] * 201) == {"steps": ["must have at most 200 steps"]}
    assert len(parse_steps([TAG] * 200, CONTEXT)) == 200


def test_branch_conditions_are_checked_with_their_paths():
    errors = errors_of(
        [
            branch(
                "check",
                [
                    {
                        "name": "X",
                        "conditions": [
                            {"field": "steps.hook.status_code", "op": "greater_or_equal", "value": 200},
                            {"field": "nope", "op": "equals", "value": 1},
                            {"field": "trigger.plan", "op": "in", "value": "pro"},
                            {"field": "steps.ghost.body", "op": "exists"},
                        ],
                        "next": "$end",
                    }
                ],
                "hook",
            ),
            {"key": "hook", "action_type": "webhook", "config": {"url": "https://example.com/x"}},
        ]
    )
    assert set(errors) == {
        "steps[0].config.branches[0].conditions[1].field",
        "steps[0].config.branches[0].conditions[2].value",
    }
    errors = errors_of(
        [
            branch("check", [{"conditions": [{"field": "steps.ghost.body", "op": "exists"}], "next": "$end"}], "$end"),
        ]
    )
    assert errors == {"steps[0].config.branches[0].conditions[0].field": ["names no step of this workflow: 'ghost'"]}


def test_the_new_configs_parse():
    steps = parse_steps(
        [
            branch(
                "b",
                [{"name": "VIP", "conditions": [{"field": "tags", "op": "contains", "value": "vip"}], "next": "s"}],
                "w",
            ),
            {
                "key": "s",
                "action_type": "split",
                "config": {
                    "paths": [{"name": "A", "weight": 30, "next": "w"}, {"name": "B", "weight": 70, "next": "e"}]
                },
            },
            {
                "key": "w",
                "action_type": "wait_for_event",
                "next": "e",
                "config": {"event": "email.clicked", "match": {"step": "b"}, "timeout": "3 days", "on_timeout": "e"},
            },
            {"key": "e", "action_type": "end", "config": {}},
        ],
        CONTEXT,
    )
    assert isinstance(steps[0].config, BranchConfig)
    assert steps[0].config.default == "w"
    assert isinstance(steps[1].config, SplitConfig)
    assert [p.weight for p in steps[1].config.paths] == [30, 70]
    assert isinstance(steps[2].config, WaitForEventConfig)
    assert steps[2].config.timeout == 3 * 86400
    assert steps[2].goto == Goto(3, "e")


def test_wait_for_event_config_errors():
    errors = errors_of(
        [{"action_type": "wait_for_event", "config": {"event": "tag.added", "match": {"link": "x"}, "timeout": "soon"}}]
    )
    assert set(errors) == {
        "steps[0].config.match.link",
        "steps[0].config.timeout",
        "steps[0].config.on_timeout",
    }


def test_split_buckets_are_deterministic_and_follow_the_weights():
    run = uuid.uuid4()
    assert split_bucket(run, "ab") == split_bucket(run, "ab")
    buckets = [split_bucket(uuid.uuid4(), "ab") for _ in range(4000)]
    assert all(0 <= b < 100 for b in buckets)
    share = sum(b < 30 for b in buckets) / len(buckets)
    assert 0.25 < share < 0.35  # a 30/70 split sends about 30% down its first path
    config = parse_steps(
        [
            {
                "key": "s",
                "action_type": "split",
                "config": {
                    "paths": [{"name": "A", "weight": 30, "next": "$end"}, {"name": "B", "weight": 70, "next": "$end"}]
                },
            }
        ],
        CONTEXT,
    )[0].config
    assert isinstance(config, SplitConfig)
    assert config.path_for(0).name == "A"
    assert config.path_for(29).name == "A"
    assert config.path_for(30).name == "B"
    assert config.path_for(99).name == "B"


def test_the_run_follows_goto_and_records_its_path():
    now = None
    from django.utils import timezone

    now = timezone.now()
    run, _ = Execution.start(step_count=3, trigger_data={}, first_key="a")
    run.begin_step(now)
    run.step_succeeded(now, {"x": 1}, Goto(2, "c"))
    assert (run.current_step_index, run.current_step_key) == (2, "c")
    run.begin_step(now)
    run.step_succeeded(now, {}, Goto(None, END), reason="ended by step")
    assert run.status is ExecutionStatus.COMPLETED
    assert run.end_reason == "ended by step"
    assert run_path(run.context, run.current_step_index, run.step_count, run.current_step_key) == ["a", "c"]
    assert run.context["step_keys"] == ["a", "c"]


def test_a_loop_is_capped():
    from django.utils import timezone

    now = timezone.now()
    run, _ = Execution.start(step_count=2, trigger_data={}, first_key="a")
    for _ in range(MAX_STEP_VISITS - 1):
        run.begin_step(now)
        run.step_succeeded(now, {}, Goto(0, "a"))
    assert run.status is ExecutionStatus.QUEUED
    run.begin_step(now)
    run.step_succeeded(now, {}, Goto(0, "a"))
    assert run.status is ExecutionStatus.FAILED
    assert "a loop is capped" in run.last_error


def _loop_until_capped(run, now) -> int:
    """Go round a one-step loop until the cap fails the run; returns how many steps it finished."""
    finished = 0
    while run.status is not ExecutionStatus.FAILED:
        run.begin_step(now)
        run.step_succeeded(now, {}, Goto(0, "a"))
        finished += 1
    return finished


def test_an_operator_s_retry_of_a_capped_run_gives_it_a_fresh_allowance():
    """The cap bounds one unattended stretch: the retry goes on at the step it was capped at, and may take
    MAX_STEP_VISITS steps again before the cap stops it once more."""
    from django.utils import timezone

    from workflows.domain.execution import LOOP_CAPPED, MoveKind

    now = timezone.now()
    run, _ = Execution.start(step_count=2, trigger_data={}, first_key="a")
    assert _loop_until_capped(run, now) == MAX_STEP_VISITS
    assert run.last_error_category == LOOP_CAPPED
    assert run.loop_capped
    assert (run.current_step_index, run.current_step_key) == (0, "a")  # where it was going when capped

    move = run.retry(now)
    assert move.kind is MoveKind.RUN_STEP
    assert run.status is ExecutionStatus.QUEUED
    assert (run.current_step_index, run.current_step_key) == (0, "a")
    assert run.steps_counted == 0
    assert len(run.context["step_keys"]) == MAX_STEP_VISITS  # its path and results are kept

    assert _loop_until_capped(run, now) == MAX_STEP_VISITS  # a fresh allowance, and no more
    assert run.loop_capped
    assert len(run.context["step_keys"]) == 2 * MAX_STEP_VISITS


def test_nothing_but_an_operator_s_retry_lifts_the_cap():
    """The engine's own moves (a goal's jump, a wait's end, a step's retry) count every step since the last
    lift; a retry of a run that failed for another reason lifts nothing."""
    from django.utils import timezone

    from workflows.domain.execution import VISITS_ALLOWED_FROM

    now = timezone.now()
    run, _ = Execution.start(step_count=2, trigger_data={}, first_key="a")
    for _ in range(MAX_STEP_VISITS - 1):
        run.begin_step(now)
        run.step_succeeded(now, {}, Goto(0, "a"))
    run.begin_step(now)
    run.step_failed(now, error="ValidationFailure: bad", category="validation", retry_delay=None)
    assert run.status is ExecutionStatus.FAILED
    assert not run.loop_capped
    run.retry(now)
    assert VISITS_ALLOWED_FROM not in run.context
    assert run.steps_counted == MAX_STEP_VISITS - 1
    run.begin_step(now)
    run.step_succeeded(now, {}, Goto(0, "a"))  # the 1,000th step: the move after it is capped
    assert run.loop_capped

    capped, _ = Execution.start(step_count=2, trigger_data={}, first_key="a")
    _loop_until_capped(capped, now)
    capped.context[VISITS_ALLOWED_FROM] = "0"  # a context tampered with lifts nothing
    assert capped.steps_counted == MAX_STEP_VISITS
