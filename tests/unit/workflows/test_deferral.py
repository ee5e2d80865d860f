"""A deferral is built from the sending rules' own verdict, keeps the rule's words, and needs an aware time."""

from datetime import UTC, datetime

import pytest

from integrations.domain.sending import Defer, Rule
from workflows.domain.deferral import Deferral, deferral_sentence

UNTIL = datetime(2026, 6, 2, 7, 0, 42, tzinfo=UTC)


def test_a_deferral_from_the_rules_verdict_keeps_its_reason_and_rule():
    verdict = Defer(UNTIL, "waiting for the send window (opens Tue 02 Jun 09:00 Europe/Paris)", Rule.SEND_WINDOW)
    deferral = Deferral.from_verdict(verdict)
    assert deferral == Deferral(UNTIL, verdict.reason, "send_window")
    data = deferral.log_data()
    assert data == {"deferred_until": "2026-06-02T07:00:42+00:00", "reason": verdict.reason, "rule": "send_window"}
    assert deferral_sentence(data) == "waiting for the send window (opens Tue 02 Jun 09:00 Europe/Paris)"


def test_a_deferral_needs_an_aware_time_and_a_row_without_a_reason_still_reads():
    with pytest.raises(ValueError, match="aware"):
        Deferral(datetime(2026, 6, 2, 7, 0), "r", "send_window")
    assert deferral_sentence({}) == "deferred"
    assert deferral_sentence(None) == ""
