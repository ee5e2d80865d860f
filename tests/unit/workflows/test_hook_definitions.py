"""A scheduled hook's definition: a value of the wrong JSON type anywhere is a problem named by its path, never
a crash (schemathesis' negative cases found `"action": {"type": {}}` answering 500)."""

import pytest

from workflows.domain.scheduled_hooks import InvalidHook, parse_hook


@pytest.mark.parametrize("kind", [{}, [], ["post_event"], 1, None, True])
def test_an_action_type_that_is_not_text_is_refused_naming_it(kind):
    hook = {"name": "N", "cron": "0 9 * * 1", "action": {"type": kind, "event": "x.y"}}
    with pytest.raises(InvalidHook) as refused:
        parse_hook(hook)
    assert [e.path for e in refused.value.errors] == ["action.type"]
