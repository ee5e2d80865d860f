"""The sending rules, each on its own and together, without a database: consent, the address, suppression,
the send window and its presets, frequency caps, the order and the combination, and where settings come from."""

from datetime import UTC, date, datetime, timedelta

import pytest

from contacts.domain.model import ConsentState
from integrations.domain.sending import (
    PRESETS,
    SEND,
    AccountSendingSettings,
    Channel,
    Defer,
    FrequencyCap,
    Outbound,
    Problems,
    Purpose,
    Refuse,
    Rule,
    SendingRules,
    SentMessage,
    WhenCapped,
    address,
    combine,
    consent,
    decide,
    frequency_cap,
    parse_account_settings,
    parse_caps,
    parse_step_rules,
    parse_window,
    parse_workflow_rules,
    resolve,
    send_window,
    suppression,
)
from integrations.domain.sending.windows import easter_sunday, french_public_holidays, spread_offset

OPTED_IN = ConsentState(unsubscribed=False, sms_opted_out=False)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def message(
    channel=Channel.SMS, purpose=Purpose.MARKETING, *, key="msg-1", to="+33612345678", state=OPTED_IN, zone="UTC"
) -> Outbound:
    return Outbound(channel=channel, purpose=purpose, key=key, address=to, consent=state, time_zone=zone)


def window(spec, spread=None):
    problems = Problems()
    if spread is not None and isinstance(spec, dict):
        spec = {**spec, "spread": spread}
    found = parse_window(spec, "window", problems)
    assert not problems, list(problems)
    return found


# --- consent, address, suppression --------------------------------------------------------------------
def test_consent_refuses_marketing_email_to_the_unsubscribed_and_lets_transactional_through():
    unsubscribed = ConsentState(unsubscribed=True, sms_opted_out=False)
    refused = consent(message(Channel.EMAIL, to="a@example.com", state=unsubscribed))
    assert refused == Refuse("the contact unsubscribed from email", Rule.CONSENT, "unsubscribed")
    assert consent(message(Channel.EMAIL, Purpose.TRANSACTIONAL, to="a@example.com", state=unsubscribed)) == SEND
    assert consent(message(Channel.EMAIL, Purpose.TEST, to="a@example.com", state=unsubscribed)) == SEND


@pytest.mark.parametrize("purpose", [Purpose.MARKETING, Purpose.TRANSACTIONAL])
def test_an_opted_out_number_gets_no_sms_and_no_call_whatever_the_purpose(purpose):
    stopped = ConsentState(unsubscribed=False, sms_opted_out=True)
    assert consent(message(Channel.SMS, purpose, state=stopped)) == Refuse(
        "the contact opted out of SMS", Rule.CONSENT, "sms_opted_out"
    )
    assert consent(message(Channel.VOICE, purpose, state=stopped)) == Refuse(
        "the contact opted out of calls", Rule.CONSENT, "sms_opted_out"
    )
    assert consent(message(Channel.EMAIL, purpose, to="a@example.com", state=stopped)) == SEND


def test_a_recipient_who_is_no_contact_has_no_consent_to_check():
    assert consent(message(Channel.EMAIL, to="someone@example.com", state=None)) == SEND


def test_nowhere_to_send_is_refused_with_the_channels_words():
    assert address(message(Channel.EMAIL, to="")) == Refuse(
        "the contact has no email address", Rule.ADDRESS, "no_address"
    )
    assert address(message(Channel.VOICE, to=" ")).reason == "the contact has no phone number"
    assert address(message(Channel.SMS)) == SEND


def test_suppression_refuses_a_listed_address_whatever_the_purpose_but_not_a_test():
    listed = {"bounced@example.com", "+15550100000"}
    for purpose in (Purpose.MARKETING, Purpose.TRANSACTIONAL):
        refused = suppression(message(Channel.EMAIL, purpose, to="Bounced@Example.com"), listed)
        assert isinstance(refused, Refuse)
        assert (refused.rule, refused.code) == (Rule.SUPPRESSION, "suppressed")
    assert suppression(message(Channel.SMS, to="+15550100000"), listed).code == "suppressed"
    assert suppression(message(Channel.EMAIL, Purpose.TEST, to="bounced@example.com"), listed) == SEND
    assert suppression(message(Channel.EMAIL, to="fine@example.com"), listed) == SEND


# --- the send window ----------------------------------------------------------------------------------
def test_inside_the_window_a_message_goes_at_once():
    us = PRESETS["us_federal"].window
    # 10:00 in New York.
    assert send_window(message(zone="America/New_York"), us, utc("2026-06-01T14:00")) == SEND


def test_outside_the_window_it_waits_for_the_next_opening_on_the_contacts_clock_spread():
    us = PRESETS["us_federal"].window
    now = utc("2026-06-02T02:00")  # 22:00 on 1 June in New York
    verdict = send_window(message(zone="America/New_York", key="k"), us, now)
    assert isinstance(verdict, Defer)
    opening = utc("2026-06-02T12:00")  # 08:00 EDT
    assert verdict.until == opening + spread_offset("k", us.spread_seconds)
    assert opening <= verdict.until < opening + timedelta(seconds=us.spread_seconds)
    assert verdict.reason == "waiting for the send window (opens Tue 02 Jun 08:00 America/New_York)"
    assert verdict.rule is Rule.SEND_WINDOW


def test_the_same_message_always_takes_the_same_place_and_others_spread():
    us = PRESETS["us_federal"].window
    now = utc("2026-06-02T02:00")
    first = send_window(message(zone="America/New_York", key="a"), us, now)
    assert first == send_window(message(zone="America/New_York", key="a"), us, now)
    releases = {send_window(message(zone="America/New_York", key=f"m{n}"), us, now).until for n in range(200)}
    assert len(releases) > 150  # 300 one-second places for 200 messages: few share one
    assert max(releases) - min(releases) > timedelta(seconds=250)


def test_the_spread_never_passes_a_short_openings_end():
    short = window({"days": ["mon-sun"], "hours": ["09:00-09:01"]}, spread=3600)
    for n in range(50):
        verdict = send_window(message(key=f"m{n}"), short, utc("2026-06-01T08:00"))
        assert isinstance(verdict, Defer)
        assert utc("2026-06-01T09:00") <= verdict.until < utc("2026-06-01T09:01")


def test_florida_closes_at_eight():
    fl = PRESETS["us_fl"].window
    # 20:30 in Miami: the federal window is open, Florida's is not.
    now = utc("2026-06-02T00:30")
    assert send_window(message(zone="America/New_York"), PRESETS["us_federal"].window, now) == SEND
    assert isinstance(send_window(message(zone="America/New_York"), fl, now), Defer)


def test_french_window_skips_sundays_and_public_holidays():
    fr = PRESETS["fr"].window
    paris = "Europe/Paris"
    # Saturday 2 May 2026, 22:30 -> not Sunday 3 May -> Monday 4 May 08:00.
    verdict = send_window(message(zone=paris), fr, utc("2026-05-02T20:30"))
    assert isinstance(verdict, Defer)
    assert verdict.until.date() == date(2026, 5, 4)
    assert "opens Mon 04 May 08:00 Europe/Paris" in verdict.reason
    # Ascension (Thursday 14 May 2026) is a public holiday: closed all day, open on Friday.
    verdict = send_window(message(zone=paris), fr, utc("2026-05-14T10:00"))
    assert isinstance(verdict, Defer)
    assert verdict.until.astimezone().date() == date(2026, 5, 15)
    # An ordinary Saturday at 21:59 is open.
    assert send_window(message(zone=paris), fr, utc("2026-05-09T19:59")) == SEND


def test_french_public_holidays_are_computed_from_easter():
    assert [easter_sunday(y) for y in (2024, 2025, 2026, 2038)] == [
        date(2024, 3, 31),
        date(2025, 4, 20),
        date(2026, 4, 5),
        date(2038, 4, 25),
    ]
    assert sorted(french_public_holidays(2026)) == [
        date(2026, 1, 1),
        date(2026, 4, 6),  # Easter Monday
        date(2026, 5, 1),
        date(2026, 5, 8),
        date(2026, 5, 14),  # Ascension
        date(2026, 5, 25),  # Whit Monday
        date(2026, 7, 14),
        date(2026, 8, 15),
        date(2026, 11, 1),
        date(2026, 11, 11),
        date(2026, 12, 25),
    ]


def test_an_opening_after_midnight_and_across_the_spring_forward_night():
    # Open 02:30-04:00 every day; on 8 March 2026 02:30 does not exist in New York: it opens at the jump.
    night = window({"days": ["mon-sun"], "hours": ["02:30-04:00"]}, spread=0)
    verdict = send_window(message(zone="America/New_York"), night, utc("2026-03-08T03:00"))  # 22:00 EST the 7th
    assert verdict == Defer(
        utc("2026-03-08T07:00"),
        "waiting for the send window (opens Sun 08 Mar 03:00 America/New_York)",
        Rule.SEND_WINDOW,
    )
    # A span wholly inside the skipped hour is no opening that night: the next one is the next night's.
    skipped = window({"days": ["mon-sun"], "hours": ["02:00-02:45"]}, spread=0)
    verdict = send_window(message(zone="America/New_York"), skipped, utc("2026-03-08T03:00"))
    assert isinstance(verdict, Defer)
    assert verdict.until == utc("2026-03-09T06:00")  # 02:00 EDT on the 9th
    # Open until 24:00, then again from 00:00: open across midnight.
    late = window({"days": ["fri", "sat"], "hours": ["20:00-24:00", "00:00-02:00"]})
    assert send_window(message(), late, utc("2026-06-05T23:59")) == SEND  # Friday
    assert send_window(message(), late, utc("2026-06-06T00:30")) == SEND  # Saturday
    assert isinstance(send_window(message(), late, utc("2026-06-07T00:30")), Defer)  # Sunday


def test_holidays_listed_close_the_day_and_a_window_that_never_opens_refuses():
    w = window({"days": ["mon"], "hours": ["09:00-17:00"], "holidays": ["2026-06-01"]})
    verdict = send_window(message(), w, utc("2026-06-01T10:00"))  # Monday 1 June, a listed holiday
    assert isinstance(verdict, Defer)
    assert verdict.until.date() == date(2026, 6, 8)
    every_monday = [(date(2026, 6, 1) + timedelta(weeks=n)).isoformat() for n in range(60)]
    never = window({"days": ["mon"], "hours": ["09:00-17:00"], "holidays": every_monday})
    assert send_window(message(), never, utc("2026-06-01T10:00")).code == "window_never_opens"


def test_no_window_and_test_messages_always_go():
    fr = PRESETS["fr"].window
    sunday = utc("2026-05-03T12:00")
    assert send_window(message(), None, sunday) == SEND
    assert send_window(message(purpose=Purpose.TEST), fr, sunday) == SEND


# --- frequency caps -----------------------------------------------------------------------------------
def sent(at: datetime, channel=Channel.SMS, purpose=Purpose.MARKETING) -> SentMessage:
    return SentMessage(at=at, channel=channel, purpose=purpose)


def test_a_rolling_cap_defers_to_when_the_oldest_counted_message_ages_out():
    now = utc("2026-06-01T12:00")
    cap = FrequencyCap(limit=3, hours=24)
    history = [sent(now - timedelta(hours=h)) for h in (30, 23, 2, 1)]  # the 30-hour-old one no longer counts
    verdict = frequency_cap(message(key="k"), [cap], history, now, spread_seconds=0)
    assert verdict == Defer(
        now + timedelta(hours=1),
        "over the frequency cap of 3 marketing messages per 24 hours (all channels); "
        "under it again Mon 01 Jun 13:00 UTC",
        Rule.FREQUENCY_CAP,
    )
    assert frequency_cap(message(), [cap], history[:3], now) == SEND


def test_a_calendar_day_cap_frees_the_contact_at_its_local_midnight():
    paris = "Europe/Paris"
    cap = FrequencyCap(limit=1, days=1)
    now = utc("2026-06-01T10:00")  # 12:00 in Paris
    yesterday_late = sent(utc("2026-05-31T21:30"))  # 23:30 on 31 May in Paris: yesterday
    assert frequency_cap(message(zone=paris), [cap], [yesterday_late], now) == SEND
    this_morning = sent(utc("2026-05-31T22:30"))  # 00:30 on 1 June in Paris: today
    verdict = frequency_cap(message(zone=paris), [cap], [this_morning], now, spread_seconds=0)
    assert isinstance(verdict, Defer)
    assert verdict.until == utc("2026-06-01T22:00")  # midnight in Paris
    # Over several calendar days: 2 per 3 days; sends on the 30th and 31st: under again on 2 June.
    cap3 = FrequencyCap(limit=2, days=3)
    history = [sent(utc("2026-05-30T10:00")), sent(utc("2026-05-31T10:00"))]
    verdict = frequency_cap(message(zone=paris), [cap3], history, now, spread_seconds=0)
    assert isinstance(verdict, Defer)
    assert verdict.until == utc("2026-06-01T22:00")  # 2 June 00:00: the 30th no longer counts


def test_caps_count_their_channel_or_all_and_transactional_only_when_asked():
    now = utc("2026-06-01T12:00")
    history = [sent(now - timedelta(hours=1), Channel.EMAIL), sent(now - timedelta(hours=2), Channel.EMAIL)]
    sms_cap = FrequencyCap(limit=1, hours=24, channel=Channel.SMS)
    all_cap = FrequencyCap(limit=2, hours=24)
    assert frequency_cap(message(Channel.SMS), [sms_cap], history, now) == SEND
    assert isinstance(frequency_cap(message(Channel.SMS), [all_cap], history, now), Defer)
    # An email cap says nothing of an SMS.
    email_cap = FrequencyCap(limit=1, hours=24, channel=Channel.EMAIL)
    assert frequency_cap(message(Channel.SMS), [email_cap], history, now) == SEND
    receipts = [sent(now - timedelta(hours=1), purpose=Purpose.TRANSACTIONAL)] * 5
    assert frequency_cap(message(), [FrequencyCap(limit=1, hours=24)], receipts, now) == SEND
    counting = FrequencyCap(limit=1, hours=24, include_transactional=True)
    assert isinstance(frequency_cap(message(), [counting], receipts, now), Defer)


def test_transactional_and_test_messages_are_never_capped_and_skip_refuses():
    now = utc("2026-06-01T12:00")
    history = [sent(now - timedelta(minutes=5))]
    cap = FrequencyCap(limit=1, hours=24)
    assert frequency_cap(message(purpose=Purpose.TRANSACTIONAL), [cap], history, now) == SEND
    assert frequency_cap(message(purpose=Purpose.TEST), [cap], history, now) == SEND
    skipped = frequency_cap(message(), [cap], history, now, when_capped=WhenCapped.SKIP)
    assert skipped == Refuse(
        "over the frequency cap of 1 marketing message per 24 hours (all channels)", Rule.FREQUENCY_CAP, "over_cap"
    )


def test_of_several_caps_the_latest_moment_wins():
    now = utc("2026-06-01T12:00")
    history = [sent(now - timedelta(hours=1)), sent(now - timedelta(hours=20))]
    hourly = FrequencyCap(limit=1, hours=2)  # under again in 1 hour
    daily = FrequencyCap(limit=2, hours=24)  # under again in 4 hours
    verdict = frequency_cap(message(), [hourly, daily], history, now, spread_seconds=0)
    assert isinstance(verdict, Defer)
    assert verdict.until == now + timedelta(hours=4)


# --- together -----------------------------------------------------------------------------------------
def test_refuse_beats_defer_beats_send_and_the_latest_defer_wins():
    early = Defer(utc("2026-06-01T09:00"), "early", Rule.SEND_WINDOW)
    late = Defer(utc("2026-06-01T10:00"), "late", Rule.FREQUENCY_CAP)
    no = Refuse("no", Rule.CONSENT, "unsubscribed")
    assert combine([]) == SEND
    assert combine([SEND, early, late, SEND]) == late
    assert combine([late, early]) == late
    assert combine([early, no, Refuse("second", Rule.SUPPRESSION, "suppressed")]) == no


def test_decide_asks_consent_before_anything_and_a_test_bypasses_everything():
    stopped = ConsentState(unsubscribed=False, sms_opted_out=True)
    rules = SendingRules(window=PRESETS["fr"].window, caps=(FrequencyCap(limit=1, hours=1),))
    sunday = utc("2026-05-03T12:00")
    assert decide(message(state=stopped, zone="Europe/Paris"), rules, now=sunday).code == "sms_opted_out"
    assert decide(message(to="", zone="Europe/Paris"), rules, now=sunday).code == "no_address"
    history = [sent(sunday - timedelta(minutes=1))]
    test = message(purpose=Purpose.TEST, state=stopped, zone="Europe/Paris")
    assert decide(test, rules, now=sunday, sent=history, suppressed={"+33612345678"}) == SEND


def test_a_cap_that_frees_the_contact_outside_the_window_waits_for_the_next_opening():
    paris = "Europe/Paris"
    rules = SendingRules(window=PRESETS["fr"].window, caps=(FrequencyCap(limit=1, hours=3),))
    now = utc("2026-06-01T18:00")  # Monday 20:00 in Paris: the window is open
    history = [sent(utc("2026-06-01T17:30"))]  # under the cap again at 20:30Z = 22:30 Paris: closed
    verdict = decide(message(zone=paris, key="k"), rules, now=now, sent=history)
    assert isinstance(verdict, Defer)
    assert verdict.rule is Rule.SEND_WINDOW
    assert "opens Tue 02 Jun 08:00 Europe/Paris" in verdict.reason
    assert utc("2026-06-02T06:00") <= verdict.until < utc("2026-06-02T06:05")


def test_a_transactional_message_obeys_the_window_unless_the_workflow_exempts_it():
    night = utc("2026-06-02T03:00")  # 23:00 in New York
    receipt = message(purpose=Purpose.TRANSACTIONAL, zone="America/New_York")
    ruled = SendingRules(window=PRESETS["us_federal"].window)
    assert isinstance(decide(receipt, ruled, now=night), Defer)
    exempt = SendingRules(window=PRESETS["us_federal"].window, transactional_exempt_from_window=True)
    assert decide(receipt, exempt, now=night) == SEND
    assert isinstance(decide(message(zone="America/New_York"), exempt, now=night), Defer)  # marketing still waits


def test_the_lookback_reads_only_as_far_as_the_caps_need():
    rules = SendingRules(caps=(FrequencyCap(limit=3, hours=24), FrequencyCap(limit=5, days=7, channel=Channel.SMS)))
    now = utc("2026-06-10T12:00")
    assert rules.lookback(message(Channel.SMS, zone="Europe/Paris"), now) == utc("2026-06-03T22:00")
    assert rules.lookback(message(Channel.EMAIL, to="a@example.com"), now) == now - timedelta(hours=24)
    assert rules.lookback(message(purpose=Purpose.TRANSACTIONAL), now) is None
    assert SendingRules().lookback(message(), now) is None


# --- settings: reading them, and which layer wins -----------------------------------------------------
def test_the_built_in_default_is_the_us_federal_window_for_sms_and_calls_and_none_for_email():
    account = AccountSendingSettings()
    for channel in (Channel.SMS, Channel.VOICE):
        purpose, rules = resolve(account=account, channel=channel)
        assert (purpose, rules.window) == (Purpose.MARKETING, PRESETS["us_federal"].window)
    assert resolve(account=account, channel=Channel.EMAIL)[1].window is None


def test_the_most_specific_layer_that_says_something_wins_it_whole():
    problems = Problems()
    account = parse_account_settings(
        {"send_windows": {"sms": "us_fl", "voice": None}, "frequency_caps": [{"max": 3, "days": 1}]}, "", problems
    )
    workflow = parse_workflow_rules(
        {"send_window": "fr", "send_windows": {"email": {"days": ["mon-fri"], "hours": ["09:00-18:00"]}}},
        "sending_rules",
        problems,
    )
    step = parse_step_rules({"subject": "hi", "send_window": None, "frequency_caps": []}, "steps[0].config", problems)
    assert not problems, list(problems)
    assert resolve(account=account, channel=Channel.SMS)[1].window == PRESETS["us_fl"].window
    assert resolve(account=account, channel=Channel.VOICE)[1].window is None  # null: the account chose none
    assert resolve(account=account, channel=Channel.SMS, workflow=workflow)[1].window == PRESETS["fr"].window
    email = resolve(account=account, channel=Channel.EMAIL, workflow=workflow)[1]
    assert email.window is not None
    assert email.window.days == frozenset(range(5))
    _, stepped = resolve(account=account, channel=Channel.SMS, workflow=workflow, step=step)
    assert (stepped.window, stepped.caps) == (None, ())
    assert resolve(account=account, channel=Channel.SMS, workflow=workflow)[1].caps == (FrequencyCap(3, days=1),)


def test_purpose_comes_from_the_sender_then_the_step_then_the_workflow():
    problems = Problems()
    workflow = parse_workflow_rules({"purpose": "transactional", "transactional_window": "exempt"}, "", problems)
    step = parse_step_rules({"purpose": "marketing"}, "", problems)
    assert not problems
    account = AccountSendingSettings()
    purpose, rules = resolve(account=account, channel=Channel.SMS, workflow=workflow)
    assert purpose is Purpose.TRANSACTIONAL
    assert rules.transactional_exempt_from_window
    assert resolve(account=account, channel=Channel.SMS, workflow=workflow, step=step)[0] is Purpose.MARKETING
    assert resolve(account=account, channel=Channel.SMS, step=step, purpose=Purpose.TEST)[0] is Purpose.TEST


def test_every_problem_of_a_setting_is_named_by_its_path():
    problems = Problems()
    parse_workflow_rules(
        {
            "purpose": "spam",
            "transactional_window": "maybe",
            "send_window": {"days": ["someday"], "hours": ["9am-5pm", "10:00-09:00"], "spread": -1},
            "send_windows": {"fax": "fr", "sms": "us_texas"},
            "frequency_caps": [
                {"max": 0, "hours": 1, "days": 1},
                {"max": 2},
                "three",
                {"max": 1, "days": 1, "channel": "x"},
            ],
            "when_capped": "drop",
            "colour": "blue",
        },
        "sending_rules",
        problems,
    )
    paths = [problem.path for problem in problems]
    assert paths == [
        "sending_rules.colour",
        "sending_rules.transactional_window",
        "sending_rules.purpose",
        "sending_rules.send_window.days[0]",
        "sending_rules.send_window.hours[0]",
        "sending_rules.send_window.hours[1]",
        "sending_rules.send_window.spread",
        "sending_rules.send_windows.fax",
        "sending_rules.send_windows.sms",
        "sending_rules.frequency_caps[0].max",
        "sending_rules.frequency_caps[0]",
        "sending_rules.frequency_caps[1]",
        "sending_rules.frequency_caps[2]",
        "sending_rules.frequency_caps[3].channel",
        "sending_rules.when_capped",
    ]


def test_window_specs_read_days_ranges_wrapping_presets_with_holidays_and_midnight():
    w = window({"days": ["fri-mon", "wed"], "hours": "18:00-24:00"})
    assert w.days == frozenset({4, 5, 6, 0, 2})
    assert str(w.spans[0]) == "18:00-24:00"
    fr = window({"preset": "fr", "holidays": ["2026-12-24"], "spread": 60})
    assert fr.calendars == ("FR",)
    assert date(2026, 12, 24) in fr.holidays
    assert fr.spread_seconds == 60
    assert fr.describe() == "Mon-Sat 08:00-22:00, not on FR public holidays, not on 1 listed holiday"
    problems = Problems()
    assert parse_window({"preset": "fr", "hours": ["09:00-10:00"]}, "w", problems) is None
    assert [p.path for p in problems] == ["w.hours"]
    assert parse_caps([{"max": 2, "hours": 48, "channel": "voice"}], "c", problems) == (
        FrequencyCap(limit=2, hours=48, channel=Channel.VOICE),
    )
    nulls = Problems()  # a period given as null is no period: refused, never a cap that counts nothing
    assert parse_caps([{"max": 2, "days": None}], "c", nulls) is None
    assert [(p.path, p.reason[:20]) for p in nulls] == [("c[0]", "needs exactly one of")]


def test_a_setting_that_does_not_read_never_loosens_the_rules():
    problems = Problems()
    account = parse_account_settings(
        {"send_windows": {"sms": "us_texas"}, "frequency_caps": [{"max": 1, "days": 1}]}, "", problems
    )
    workflow = parse_workflow_rules({"send_window": {"days": []}, "frequency_caps": "none"}, "", problems)
    assert [p.path for p in problems] == ["send_windows.sms", "send_window.days", "send_window.hours", "frequency_caps"]
    _, rules = resolve(account=account, channel=Channel.SMS, workflow=workflow)
    assert rules.window == PRESETS["us_federal"].window  # not "no window"
    assert rules.caps == (FrequencyCap(limit=1, days=1),)  # not "no caps"
