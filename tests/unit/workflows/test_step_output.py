"""What later steps read of a step (kept whole, storable, bounded) beside what its log shows (redacted)."""

from workflows.domain.logs import STEP_OUTPUT_MAX_BYTES, bounded_output, bounded_response
from workflows.domain.redaction import answer_step, shown_context


def test_the_output_keeps_urls_and_values_whole_where_the_log_cuts_them():
    answer = {"status_code": 200, "body": '{"portal": "https://p.example/c/42?lang=fr"}'}
    answer["json"] = {"portal": "https://p.example/c/42?lang=fr", "tier": "gold"}
    assert bounded_output(answer)["json"] == {"portal": "https://p.example/c/42?lang=fr", "tier": "gold"}
    assert bounded_response(answer)["json"]["portal"] == "https://p.example"


def test_the_output_is_storable():
    out = bounded_output({"json": {"id\x00": "a\x00b", "n": float("nan"), "deep": {"x": "\ud800"}}})
    assert out["json"] == {"id\ufffd": "a\ufffdb", "n": "nan", "deep": {"x": "\ufffd"}}


def test_a_parsed_answer_too_big_to_keep_whole_is_left_out_never_kept_in_part():
    big = {"items": [{"n": i, "text": "x" * 100} for i in range(500)]}
    out = bounded_output({"status_code": 200, "body": "…", "json": big})
    assert "json" not in out
    assert "16 KB" in out["json_omitted"]
    assert out["status_code"] == 200
    small = {"items": [{"n": i} for i in range(500)]}  # about 5 KB: kept, every item
    assert bounded_output({"json": small})["json"] == small
    assert len(str(bounded_output({"body": "y" * 100_000}))) < STEP_OUTPUT_MAX_BYTES


def test_which_condition_fields_read_an_answer():
    assert answer_step("steps.call_api.body.plan") == "call_api"
    assert answer_step("steps.call_api.json.plan") == "call_api"
    assert answer_step("steps.call_api.headers.content-type") == "call_api"
    assert answer_step("steps.call_api.status_code") is None
    assert answer_step("steps.welcome.opened") is None
    assert answer_step("trigger.body.plan") is None


def test_a_runs_context_is_shown_without_its_steps_outputs():
    context = {"event": "tag.added", "trigger": {"plan": "pro"}, "steps": [{"body": "raw"}], "step_keys": ["a"]}
    assert shown_context(context) == {
        "event": "tag.added",
        "trigger": {"plan": "pro"},
        "steps": "1 step results, shown redacted with each attempt",
        "step_keys": ["a"],
    }
