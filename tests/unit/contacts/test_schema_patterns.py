"""The API schema's patterns for tags and phone numbers say what contacts.domain takes (so a client, and the
schemathesis run, can trust them): every value the pattern admits is accepted, and what it refuses is refused."""

import re
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contacts.api.serializers import FORMAT_CHARACTERS, PHONE_PATTERN, TAG_PATTERN
from contacts.domain.model import MAX_TAG_LENGTH, ContactError, normalize_phone, normalize_tag

TAG = re.compile(TAG_PATTERN)
PHONE = re.compile(PHONE_PATTERN)


def _accepts_tag(text: str) -> bool:
    try:
        normalize_tag(text)
    except ContactError:
        return False
    return True


def _accepts_phone(text: str) -> bool:
    try:
        normalize_phone(text)
    except ContactError:
        return False
    return True


def test_the_pattern_names_every_format_character_of_the_basic_plane():
    listed = re.compile(f"[{FORMAT_CHARACTERS}]")
    format_characters = [chr(c) for c in range(0x10000) if unicodedata.category(chr(c)) == "Cf"]
    assert [c for c in format_characters if not listed.fullmatch(c)] == []
    assert [chr(c) for c in range(0x10000) if listed.fullmatch(chr(c)) and unicodedata.category(chr(c)) != "Cf"] == []


# The characters the rules are about (control, format, white space and separators), and a sample of the rest.
_SPECIAL = {"Cc", "Cf", "Zs", "Zl", "Zp"}
CHARACTERS = [
    chr(code)
    for code in range(sys.maxunicode + 1)
    if not 0xD800 <= code <= 0xDFFF
    and (unicodedata.category(chr(code)) in _SPECIAL or chr(code).isspace() or code % 997 == 0)
]


def _astral_format(text: str) -> bool:
    """Beyond the Basic Multilingual Plane the pattern names no format character (ECMA patterns without the
    `u` flag read those as pairs of surrogates): the one place where it admits what the domain refuses."""
    return any(ord(c) > 0xFFFF and unicodedata.category(c) == "Cf" for c in text)


@pytest.mark.parametrize("template", ["{}", "a{}", "{}a", "a{}b", " {} ", "\u200b{}", "a {}\t", "\x01{}"])
def test_the_tag_pattern_agrees_with_the_domain_character_by_character(template):
    disagree = [
        text
        for character in CHARACTERS
        for text in [template.format(character)]
        if bool(TAG.search(text)) != _accepts_tag(text) and not _astral_format(text)
    ]
    assert disagree == []


@settings(max_examples=300, deadline=None)
@given(st.from_regex(TAG_PATTERN, fullmatch=True).filter(lambda t: len(t) <= MAX_TAG_LENGTH))
def test_every_tag_the_pattern_admits_is_a_tag(text):
    if _astral_format(text):
        return  # the one gap, above
    if len(text.lower()) > MAX_TAG_LENGTH:
        return  # lower-casing lengthens a few letters (İ), past the limit
    assert _accepts_tag(text), repr(text)


@settings(max_examples=300, deadline=None)
@given(st.from_regex(PHONE_PATTERN, fullmatch=True).filter(lambda t: len(t) <= 32))
def test_every_phone_the_pattern_admits_is_a_phone(text):
    assert _accepts_phone(text), repr(text)


@pytest.mark.parametrize(
    ("text", "admitted"),
    [
        ("+1 (555) 010-0000", True),
        ("+44 20 7946 0000", True),
        ("555.010.0000", True),
        ("", True),
        ("   ", True),
        ("+", False),
        ("1" * 16, False),
        ("+1 555 CALL NOW", False),
        ("\u0665\u0665\u0665", False),  # digits, but not ASCII ones
    ],
)
def test_the_phone_pattern_agrees_with_the_domain(text, admitted):
    assert bool(PHONE.search(text)) is admitted
    assert _accepts_phone(text) is admitted
