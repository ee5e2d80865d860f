"""Contacts over HTTP. Thin: parse, call a contacts service or selector, render."""

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.domain.roles import Permission
from api.filters import Boolean, FilterSet, Text, Timestamp
from api.problems import InvalidInput
from api.views import AccountView, no_content
from contacts.api.serializers import TAG_SCHEMA, ContactChangeIn, ContactCreateIn, ContactOut, ContactReplaceIn, TagIn
from contacts.application.selectors import contact_get, contact_list
from contacts.application.services import (
    contact_add_tag,
    contact_create,
    contact_delete,
    contact_remove_tag,
    contact_update,
)
from contacts.domain.model import ConsentSource, ContactError

TAG_PARAM = OpenApiParameter("tag", TAG_SCHEMA, OpenApiParameter.PATH, description="The tag, URL-encoded.")


class ContactView(AccountView):
    write_permission = Permission.MANAGE_CONTACTS
    domain_errors = {ContactError: lambda e: InvalidInput.field(e.field, e.reason)}


class ContactListView(ContactView):
    filters = FilterSet(
        Text("tag", "Only contacts with this tag (case-insensitive).", schema=TAG_SCHEMA),
        Text("email", "Only the contact with this email address (case-insensitive)."),
        Text("phone", "Only contacts with this phone number (exact, E.164)."),
        Boolean("unsubscribed", "true: only contacts who unsubscribed from email; false: only those who did not."),
        Boolean("sms_opted_out", "true: only contacts who opted out of SMS and calls; false: the others."),
        Timestamp("created_after", "Only contacts created at or after this time (ISO 8601)."),
        Timestamp("created_before", "Only contacts created before this time (ISO 8601)."),
    )

    @extend_schema(operation_id="contacts_list", summary="List contacts, newest first", responses=ContactOut(many=True))
    def get(self, request: Request) -> Response:
        contacts = contact_list(account_id=self.account_id, **self.parse_filters())
        return self.paginated(contacts, ContactOut)

    @extend_schema(
        operation_id="contacts_create",
        summary="Create a contact",
        description="Publishes `contact.created`, and `tag.added` for each tag.",
        request=ContactCreateIn,
        responses={201: ContactOut},
    )
    def post(self, request: Request) -> Response:
        body = ContactCreateIn(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        consent = ContactCreateIn.consent(data)
        contact = contact_create(account_id=self.account_id, consent=consent, consent_source=ConsentSource.API, **data)
        location = reverse("api-contact-detail", kwargs={"contact_id": contact.pk})
        return Response(ContactOut(contact).data, status=201, headers={"Location": location})


class ContactDetailView(ContactView):
    @extend_schema(operation_id="contacts_read", summary="Read a contact", responses=ContactOut)
    def get(self, request: Request, contact_id: int) -> Response:
        return Response(ContactOut(self.scoped(contact_get, contact_id=contact_id)).data)

    @extend_schema(
        operation_id="contacts_replace",
        summary="Replace a contact's profile",
        description="Every profile field is required; custom_fields is replaced. Consent changes only when given. "
        "Tags change through the tag endpoints.",
        request=ContactReplaceIn,
        responses=ContactOut,
    )
    def put(self, request: Request, contact_id: int) -> Response:
        return self._change(request, contact_id, ContactReplaceIn, merge=False)

    @extend_schema(
        operation_id="contacts_update",
        summary="Change some of a contact's fields",
        description="Only the fields given change; custom_fields are merged key by key. Publishes `contact.updated`.",
        request=ContactChangeIn,
        responses=ContactOut,
    )
    def patch(self, request: Request, contact_id: int) -> Response:
        return self._change(request, contact_id, ContactChangeIn, merge=True)

    @extend_schema(
        operation_id="contacts_delete",
        summary="Delete a contact",
        description="Publishes `contact.deleted` first.",
        responses={204: None},
    )
    def delete(self, request: Request, contact_id: int) -> Response:
        contact = self.scoped(contact_get, contact_id=contact_id)
        contact_delete(contact_id=contact.pk)
        return no_content()

    def _change(self, request: Request, contact_id: int, serializer_class, *, merge: bool) -> Response:
        contact = self.scoped(contact_get, contact_id=contact_id)
        body = serializer_class(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        consent = serializer_class.consent(fields)
        contact = contact_update(
            contact_id=contact.pk,
            fields=fields,
            merge_custom_fields=merge,
            consent=consent,
            consent_source=ConsentSource.API,
        )
        return Response(ContactOut(contact).data)


class ContactTagsView(ContactView):
    @extend_schema(
        operation_id="contacts_tags_add",
        summary="Tag a contact",
        description="201 when the tag is new (and `tag.added` is published, which can start workflows); "
        "200 when the contact already had it.",
        request=TagIn,
        responses={201: ContactOut, 200: ContactOut},
    )
    def post(self, request: Request, contact_id: int) -> Response:
        contact = self.scoped(contact_get, contact_id=contact_id)
        body = TagIn(data=request.data)
        body.is_valid(raise_exception=True)
        contact, added = contact_add_tag(contact_id=contact.pk, tag=body.validated_data["tag"])
        return Response(ContactOut(contact).data, status=201 if added else 200)


class ContactTagView(ContactView):
    @extend_schema(
        operation_id="contacts_tags_remove",
        summary="Untag a contact",
        description="Publishes `tag.removed` when the contact had the tag; answers the contact either way.",
        parameters=[TAG_PARAM],
        responses={200: ContactOut},
    )
    def delete(self, request: Request, contact_id: int, tag: str) -> Response:
        contact = self.scoped(contact_get, contact_id=contact_id)
        contact, _ = contact_remove_tag(contact_id=contact.pk, tag=tag)
        return Response(ContactOut(contact).data)
