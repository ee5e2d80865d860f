"""Contact bodies: one serializer per direction (HackSoft), so what is read never leaks into what is written."""

from typing import Any

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from api.serializers import StrictSerializer
from contacts.application.clock import contact_clock
from contacts.domain.clock import MAX_TIME_ZONE_LENGTH, ClockSource
from contacts.domain.model import MAX_TAG_LENGTH, MAX_TAGS, ConsentChannel
from contacts.infrastructure.models import Contact

TAGS_HINT = "tags change through POST /api/v1/contacts/{id}/tags and DELETE /api/v1/contacts/{id}/tags/{tag}"


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
    phone = serializers.CharField(max_length=32, allow_blank=True, required=False, help_text="E.164, e.g. +15551234567")
    first_name = serializers.CharField(max_length=150, allow_blank=True, required=False)
    last_name = serializers.CharField(max_length=150, allow_blank=True, required=False)
    time_zone = serializers.CharField(
        max_length=MAX_TIME_ZONE_LENGTH, allow_blank=True, required=False, help_text=TIME_ZONE_HINT
    )
    custom_fields = serializers.DictField(required=False, help_text="Any JSON object.")


@extend_schema_serializer(component_name="ContactCreate")
class ContactCreateIn(_OptionalProfile):
    tags = serializers.ListField(
        child=serializers.CharField(max_length=MAX_TAG_LENGTH), required=False, max_length=MAX_TAGS
    )


@extend_schema_serializer(component_name="ContactChange")
class ContactChangeIn(_OptionalProfile):
    """PATCH: only what is given changes; custom_fields are merged key by key."""

    unknown_field_hints = {"tags": TAGS_HINT}


@extend_schema_serializer(component_name="ContactReplace")
class ContactReplaceIn(_ConsentFields):
    """PUT: every profile field is required (an omitted one would be wiped); consent changes only when given."""

    email = serializers.EmailField(max_length=254, allow_blank=True)
    phone = serializers.CharField(max_length=32, allow_blank=True, help_text="E.164, e.g. +15551234567")
    first_name = serializers.CharField(max_length=150, allow_blank=True)
    last_name = serializers.CharField(max_length=150, allow_blank=True)
    time_zone = serializers.CharField(
        max_length=MAX_TIME_ZONE_LENGTH,
        allow_blank=True,
        required=False,
        help_text=f"{TIME_ZONE_HINT} Optional here: omitted, it is kept (it came after PUT's other fields).",
    )
    custom_fields = serializers.DictField(help_text="Any JSON object; replaces the stored one.")
    unknown_field_hints = {"tags": TAGS_HINT}


@extend_schema_serializer(component_name="Tag")
class TagIn(StrictSerializer):
    tag = serializers.CharField(max_length=MAX_TAG_LENGTH, help_text="Compared case-insensitively, trimmed.")
