"""Contact bodies: one serializer per direction (HackSoft), so what is read never leaks into what is written."""

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from api.serializers import CHECKED, WHITE_SPACE, StrictSerializer
from contacts.application.clock import contact_clock
from contacts.domain.clock import MAX_TIME_ZONE_LENGTH, ClockSource
from contacts.domain.model import MAX_PHONE_DIGITS, MAX_TAG_LENGTH, MAX_TAGS, ConsentChannel
from contacts.infrastructure.models import Contact

TAGS_HINT = "tags change through POST /api/v1/contacts/{id}/tags and DELETE /api/v1/contacts/{id}/tags/{tag}"

# --- What contacts.domain takes, as JSON Schema (tests/unit/contacts/test_schema_patterns.py holds them to it) ---

_CONTROL = "\\x00-\\x1f\\x7f-\\x9f"  # Unicode Cc: refused in a tag
# Unicode Cf (format characters: soft hyphen, zero-width space and joiners, BOM, direction marks...): dropped from
# a tag, so a tag of nothing else is blank. Those of the Basic Multilingual Plane: a pattern naming characters
# beyond it is read differently by ECMA regular expressions without the `u` flag, and schemathesis refuses it.
FORMAT_CHARACTERS = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
)
# normalize_tag drops format characters, strips white space, then refuses control characters: so white space
# (control or not) and format characters around it, something visible, and no control character inside.
_VISIBLE = f"[^{WHITE_SPACE}{_CONTROL}{FORMAT_CHARACTERS}]"
_AROUND = f"[{WHITE_SPACE}{FORMAT_CHARACTERS}]*"
TAG_PATTERN = f"^{_AROUND}{_VISIBLE}(?:[^{_CONTROL}]*{_VISIBLE})?{_AROUND}$"
TAG_SCHEMA = {
    "type": "string",
    "maxLength": MAX_TAG_LENGTH,
    "pattern": TAG_PATTERN,
    "description": "Compared case-insensitively, trimmed, invisible format characters dropped.",
}
_PHONE_PUNCTUATION = f"{WHITE_SPACE}().\\-/"
# Digits (at most 15), a leading + and spaces, dots, dashes, slashes and brackets between them; or nothing.
PHONE_PATTERN = (
    f"^[{WHITE_SPACE}]*(?:\\+?[{_PHONE_PUNCTUATION}]*(?:[0-9][{_PHONE_PUNCTUATION}]*){{1,{MAX_PHONE_DIGITS}}})?$"
)
_PHONE_SCHEMA = {
    "type": "string",
    "maxLength": 32,
    "pattern": PHONE_PATTERN,
    "description": "E.164, e.g. +15551234567 (spaces, dots, dashes and brackets are dropped); empty: none.",
}
# A contact needs an email address or a phone number (contacts.domain.check_reachable).
_REACHABLE = {
    "anyOf": [
        {"required": ["email"], "properties": {"email": {"minLength": 1}}},
        {"required": ["phone"], "properties": {"phone": {"pattern": "[0-9]"}}},
    ]
}


@extend_schema_field(_PHONE_SCHEMA)
class PhoneField(serializers.CharField):
    pass


@extend_schema_field(TAG_SCHEMA)
class TagField(serializers.CharField):
    pass


@extend_schema_field(
    {"type": "string", "format": "iana-time-zone", CHECKED: "an IANA time zone name (any case), or empty: derived"}
)
class TimeZoneField(serializers.CharField):
    pass


TIME_ZONE_HINT = (
    "The contact's own time zone (IANA name, e.g. Europe/Paris); empty: derived from the phone number where "
    "its country or region has one zone, else the account's. See resolved_time_zone."
)


@extend_schema_serializer(component_name="ContactClock")
class ContactClockOut(serializers.Serializer):
    time_zone = serializers.CharField(help_text="The zone the contact's dates and times are read in.")
    # DRF's metaclass takes declared fields off the class, so this `source` never shadows Field.source.
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=[s.value for s in ClockSource],
        help_text="Where it came from: the contact's own field, its phone number, or its account.",
    )


@extend_schema_serializer(component_name="Contact")
class ContactOut(serializers.ModelSerializer):
    class Meta:
        model = Contact
        fields = [
            "id",
            "email",
            "phone",
            "first_name",
            "last_name",
            "time_zone",
            "resolved_time_zone",
            "custom_fields",
            "tags",
            "unsubscribed",
            "sms_opted_out",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    email = serializers.CharField(read_only=True, help_text="Empty when the contact has none.")
    tags = serializers.ListField(child=serializers.CharField(), read_only=True)
    custom_fields = serializers.DictField(read_only=True)
    time_zone = serializers.CharField(read_only=True, help_text=TIME_ZONE_HINT)
    resolved_time_zone = serializers.SerializerMethodField()

    @extend_schema_field(ContactClockOut)
    def get_resolved_time_zone(self, contact: Contact) -> dict[str, Any]:
        # The selectors annotate the account's zone; a contact a service returned reads it (one query).
        return contact_clock(contact, account_time_zone=getattr(contact, "account_time_zone", None)).as_dict()


class _ConsentFields(StrictSerializer):
    unsubscribed = serializers.BooleanField(
        required=False, help_text="No marketing email. Recorded as a consent change."
    )
    sms_opted_out = serializers.BooleanField(
        required=False, help_text="No SMS and no calls. Recorded as a consent change."
    )

    @staticmethod
    def consent(data: dict) -> dict[ConsentChannel, bool]:
        """The consent fields given, by channel; popped from `data`."""
        consent = {}
        if "unsubscribed" in data:
            consent[ConsentChannel.EMAIL] = data.pop("unsubscribed")
        if "sms_opted_out" in data:
            consent[ConsentChannel.SMS] = data.pop("sms_opted_out")
        return consent


class _OptionalProfile(_ConsentFields):
    email = serializers.EmailField(max_length=254, allow_blank=True, required=False)
    phone = PhoneField(max_length=32, allow_blank=True, required=False)
    first_name = serializers.CharField(max_length=150, allow_blank=True, required=False)
    last_name = serializers.CharField(max_length=150, allow_blank=True, required=False)
    time_zone = TimeZoneField(
        max_length=MAX_TIME_ZONE_LENGTH, allow_blank=True, required=False, help_text=TIME_ZONE_HINT
    )
    custom_fields = serializers.DictField(required=False, help_text="Any JSON object.")


@extend_schema_serializer(component_name="ContactCreate")
class ContactCreateIn(_OptionalProfile):
    tags = serializers.ListField(child=TagField(max_length=MAX_TAG_LENGTH), required=False, max_length=MAX_TAGS)

    @classmethod
    def schema_extra(cls, *, patch: bool) -> Mapping[str, object]:
        return _REACHABLE


@extend_schema_serializer(component_name="ContactChange")
class ContactChangeIn(_OptionalProfile):
    """PATCH: only what is given changes; custom_fields are merged key by key. A change that leaves the contact
    neither an email address nor a phone number is refused."""

    unknown_field_hints = {"tags": TAGS_HINT}

    @classmethod
    def schema_extra(cls, *, patch: bool) -> Mapping[str, object]:
        blank = {"email": {"maxLength": 0}, "phone": {"pattern": "^[^0-9]*$"}}
        return {"not": {"required": ["email", "phone"], "properties": blank}}


@extend_schema_serializer(component_name="ContactReplace")
class ContactReplaceIn(_ConsentFields):
    """PUT: every profile field is required (an omitted one would be wiped); consent changes only when given."""

    email = serializers.EmailField(max_length=254, allow_blank=True)
    phone = PhoneField(max_length=32, allow_blank=True)
    first_name = serializers.CharField(max_length=150, allow_blank=True)
    last_name = serializers.CharField(max_length=150, allow_blank=True)
    time_zone = TimeZoneField(
        max_length=MAX_TIME_ZONE_LENGTH,
        allow_blank=True,
        required=False,
        help_text=f"{TIME_ZONE_HINT} Optional here: omitted, it is kept (it came after PUT's other fields).",
    )
    custom_fields = serializers.DictField(help_text="Any JSON object; replaces the stored one.")
    unknown_field_hints = {"tags": TAGS_HINT}

    @classmethod
    def schema_extra(cls, *, patch: bool) -> Mapping[str, object]:
        return _REACHABLE


@extend_schema_serializer(component_name="Tag")
class TagIn(StrictSerializer):
    tag = TagField(max_length=MAX_TAG_LENGTH)
