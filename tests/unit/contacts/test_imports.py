"""Reading a spreadsheet row as a contact: column guesses, every problem of a row, duplicates in a file."""

from contacts.domain.imports import duplicate_problems, guess_target, mapping_problems, read_row


def test_headers_are_guessed_and_unknown_ones_become_custom_fields():
    headers = ["E-mail", "Mobile", "First name", "Surname", "Tags", "Plan type", "2nd address", ""]
    assert [guess_target(h) for h in headers] == [
        "email",
        "phone",
        "first_name",
        "last_name",
        "tags",
        "custom:plan_type",
        "custom:f_2nd_address",
        "",
    ]


def test_a_mapping_needs_an_email_or_a_phone_and_one_column_per_field():
    assert mapping_problems(["email", "first_name"]) == []
    assert mapping_problems(["first_name"]) == ["Map a column to email or to phone: a contact needs one of them."]
    assert "Two columns are mapped to email" in mapping_problems(["email", "email"])[0]
    assert "cannot be a custom field name" in mapping_problems(["email", "custom:9lives"])[0]


def test_every_problem_of_a_row_is_named_by_its_column():
    header = ["Email", "Phone", "Tags", "Plan"]
    mapping = ["email", "phone", "tags", "custom:plan"]
    row, problems = read_row(7, ["Ada@Example.com", "+1 (555) 010-0001", "VIP, trial", "pro"], header, mapping)
    assert problems == []
    assert row.fields == {"email": "ada@example.com", "phone": "+15550100001"}
    assert row.tags == ["vip", "trial"]
    assert row.custom_fields == {"plan": "pro"}
    _, problems = read_row(8, ["not-an-email", "call me", "", ""], header, mapping)
    assert [(p.row, p.column) for p in problems] == [(8, "Email"), (8, "Phone")]
    _, problems = read_row(9, ["", "", "vip", ""], header, mapping)
    assert [p.message for p in problems] == ["has neither an email address nor a phone number"]


def test_the_same_email_twice_in_a_file_is_a_problem_of_the_later_row():
    header, mapping = ["Email"], ["email"]
    rows = [read_row(n, [email], header, mapping)[0] for n, email in [(2, "a@x.io"), (3, "b@x.io"), (4, "A@x.io")]]
    problems = duplicate_problems(rows, {"email": "Email"})
    assert [(p.row, p.message) for p in problems] == [(4, "a@x.io is also on row 2")]


def test_a_row_with_more_tags_than_a_contact_may_hold_is_refused():
    """An import writes new contacts with bulk_create, past the tag services: the row check holds the limit."""
    from contacts.domain.model import MAX_TAGS

    header, mapping = ["Email", "Tags"], ["email", "tags"]
    many = ", ".join(f"t{i}" for i in range(MAX_TAGS + 1))
    _, problems = read_row(2, ["ada@example.com", many], header, mapping)
    assert [(p.row, p.column) for p in problems] == [(2, "Tags")]
    assert f"at most {MAX_TAGS} tags" in problems[0].message
    row, problems = read_row(3, ["bob@example.com", ", ".join(f"t{i}" for i in range(MAX_TAGS))], header, mapping)
    assert problems == []
    assert len(row.tags) == MAX_TAGS


def test_a_row_may_not_take_its_contact_past_max_tags_with_the_tags_it_has_or_the_tag_for_everyone():
    from contacts.domain.imports import ImportedRow, tag_limit_problem
    from contacts.domain.model import MAX_TAGS

    has = [f"old{i}" for i in range(MAX_TAGS - 1)]
    row = ImportedRow(7, tags=["old0", "new"])  # one it has already, one new: exactly full
    assert tag_limit_problem(row, "Tags", has=has) is None
    problem = tag_limit_problem(row, "Tags", has=has, everyone="webinar")
    assert problem is not None
    assert (problem.row, problem.column) == (7, "Tags")
    assert problem.message.startswith(f"would give the contact {MAX_TAGS + 1} tags ({MAX_TAGS - 1} it has, 2 from")
    assert tag_limit_problem(row, "Tags", has=has, everyone="old1") is None  # a tag it has adds nothing
    full_row = ImportedRow(8, tags=[f"t{i}" for i in range(MAX_TAGS)])
    assert tag_limit_problem(full_row, "Tags") is None
    assert tag_limit_problem(full_row, "Tags", everyone="webinar") is not None
    # A contact stored past the limit before the rule keeps its tags, and may be given those it has.
    legacy = [f"t{i}" for i in range(MAX_TAGS + 3)]
    assert tag_limit_problem(ImportedRow(9, tags=["t1"]), "Tags", has=legacy) is None


def test_a_time_zone_column_is_guessed_spelled_one_way_and_a_bad_one_named():
    assert [guess_target(h) for h in ("Time zone", "TZ", "timezone")] == ["time_zone"] * 3
    header, mapping = ["Email", "Time zone"], ["email", "time_zone"]
    row, problems = read_row(2, ["ada@example.com", "europe/paris"], header, mapping)
    assert (row.fields["time_zone"], problems) == ("Europe/Paris", [])
    row, problems = read_row(3, ["ada@example.com", ""], header, mapping)
    assert (row.fields["time_zone"], problems) == ("", [])
    _, problems = read_row(4, ["ada@example.com", "Paris time"], header, mapping)
    assert [(p.row, p.column, p.message) for p in problems] == [
        (4, "Time zone", "'Paris time' is not an IANA time zone name (e.g. Europe/Paris, UTC)")
    ]
