"""Tag spelling and consent, without a database."""

import pytest

from contacts.domain.model import (
    MAX_TAGS,
    ConsentState,
    ContactError,
    check_reachable,
    normalize_tag,
    normalize_tags,
    with_tag,
    without_tag,
)


@pytest.mark.parametrize(("raw", "tag"), [("Trial", "trial"), ("  VIP  ", "vip"), ("new lead", "new lead")])
def test_tags_are_trimmed_and_lower_case(raw, tag):
    assert normalize_tag(raw) == tag


@pytest.mark.parametrize(("raw", "reason"), [("", "blank"), ("   ", "blank"), ("x" * 65, "64"), (7, "string")])
def test_bad_tags_are_refused_with_the_reason(raw, reason):
    with pytest.raises(ContactError, match=reason) as raised:
        normalize_tag(raw)
    assert raised.value.field == "tag"


def test_adding_and_removing_tags_reports_whether_anything_changed():
    tags, added = with_tag(["a"], "B")
    assert (tags, added) == (["a", "b"], True)
    assert with_tag(tags, "b ") == (["a", "b"], False)
    assert without_tag(tags, "A") == (["b"], True)
    assert without_tag(["b"], "zzz") == (["b"], False)


@pytest.mark.parametrize(
    "raw",
    ["vip\u200b", "\u200bvip", "v\u200ci\u200dp", "\ufeffvip", "vi\u00adp", "\u202evip", "v\u2060ip"],
)
def test_tags_drop_zero_width_and_other_invisible_format_characters(raw):
    assert normalize_tag(raw) == "vip"


def test_a_tag_of_nothing_but_zero_width_characters_is_blank():
    with pytest.raises(ContactError, match="blank"):
        normalize_tag(" \u200b\u200d ")


def test_a_contact_holds_at_most_max_tags():
    full = [f"t{i}" for i in range(MAX_TAGS)]
    assert with_tag(full, "t0") == (full, False)  # a tag it has is no new tag
    with pytest.raises(ContactError, match=f"at most {MAX_TAGS} tags") as raised:
        with_tag(full, "one-more")
    assert raised.value.field == "tags"
    assert without_tag(full, "t1")[1] is True


def test_a_whole_tag_list_is_normalized_deduplicated_and_bounded():
    assert normalize_tags(["VIP", "vip\u200b", " trial "]) == ["vip", "trial"]
    assert len(normalize_tags([f"t{i}" for i in range(MAX_TAGS)] + ["T1"])) == MAX_TAGS
    with pytest.raises(ContactError, match=f"at most {MAX_TAGS}"):
        normalize_tags([f"t{i}" for i in range(MAX_TAGS + 1)])
    with pytest.raises(ContactError, match="list"):
        normalize_tags("vip")


@pytest.mark.parametrize(("email", "phone"), [("a@example.com", ""), ("", "+15550100000"), ("a@b.co", "+1555")])
def test_a_contact_with_an_email_or_a_phone_is_reachable(email, phone):
    check_reachable(email, phone)


def test_a_contact_with_neither_an_email_nor_a_phone_is_refused():
    with pytest.raises(ContactError, match="needs an email address or a phone number") as raised:
        check_reachable("", "")
    assert raised.value.field == "email"


def test_consent_is_per_channel_and_voice_follows_sms():
    state = ConsentState(unsubscribed=True, sms_opted_out=False)
    assert (state.allows_email(), state.allows_sms(), state.allows_voice()) == (False, True, True)
    state = ConsentState(unsubscribed=False, sms_opted_out=True)
    assert (state.allows_email(), state.allows_sms(), state.allows_voice()) == (True, False, False)


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        ("+1 (555) 010-0000", "+15550100000"),
        ("+44 (0)20 7946 0000", "+442079460000"),  # the trunk prefix is not dialled after the country code
        ("+39 (0)6 1234 5678", "+390612345678"),  # except in Italy, where the 0 is part of the number
        ("020 7946 0000", "02079460000"),  # no country code: kept as written, digits only
        ("  +33 1.23.45.67.89 ", "+33123456789"),
        ("'+15550100000", "+15550100000"),  # as the CSV export writes it (a spreadsheet's text mark)
        ("", ""),
    ],
)
def test_phones_are_stored_in_one_spelling(written, stored):
    from contacts.domain.model import normalize_phone

    assert normalize_phone(written) == stored


@pytest.mark.parametrize("written", ["call me", "+1 555 O1O", "1" * 16, "+١٢٣"])
def test_what_is_no_phone_number_is_refused_naming_the_field(written):
    from contacts.domain.model import ContactError, normalize_phone

    with pytest.raises(ContactError) as raised:
        normalize_phone(written)
    assert raised.value.field == "phone"


@pytest.mark.parametrize(
    ("before", "after", "changed"),
    [
        ({}, {"plan": "pro"}, ["plan"]),  # absent -> set
        ({"plan": "pro"}, {"plan": "team"}, ["plan"]),  # set -> another value
        ({"plan": "pro"}, {}, ["plan"]),  # set -> removed
        ({"plan": "pro"}, {"plan": None}, ["plan"]),  # set -> null
        ({"plan": "pro"}, {"plan": "pro", "seats": 3}, ["seats"]),  # another field: plan is not named
        ({}, {"seats": 3}, ["seats"]),  # plan absent before and after: not named
        ({}, {"plan": None}, []),  # absent -> null: still no value
        ({"plan": ""}, {}, []),  # empty text -> absent: still no value
        ({"vip": 1}, {"vip": True}, ["vip"]),  # 1 and True are different values
        ({"seats": 3}, {"seats": 3.0}, []),
        ({"b": 1, "a": 1}, {"a": 2, "b": 2}, ["a", "b"]),  # sorted
    ],
)
def test_a_custom_field_changes_only_when_its_own_value_does(before, after, changed):
    from contacts.domain.model import changed_custom_fields

    assert changed_custom_fields(before, after) == changed
