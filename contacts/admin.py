"""Contacts in the admin. Saving goes through the contact services, so a marketer's edit emits the
same events as the API's (and starts the same workflows)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse

from accounts.admin_scoping import AccountScopedAdmin, allowed_account_ids, check_account, scope
from accounts.domain.roles import Permission
from accounts.infrastructure.models import time_zone_choices
from contacts import admin_imports
from contacts.admin_widgets import TagListField, TagListWidget
from contacts.application.clock import contact_clock
from contacts.application.exports import contacts_export
from contacts.application.selectors import account_tags, with_tag
from contacts.application.services import (
    EDITABLE_FIELDS,
    contact_add_tag,
    contact_create,
    contact_delete,
    contact_remove_tag,
    contact_update,
)
from contacts.domain.clock import ClockSource, normalize_time_zone
from contacts.domain.exports import ExportFormat
from contacts.domain.model import ContactError, check_reachable, normalize_phone, normalize_tag, normalize_tags
from contacts.infrastructure.models import ConsentChange, Contact

# Other apps add panels to a contact's page (the workflow engine: the contact's runs) without contacts
# knowing them: a function (request, contact) -> HTML appended here is shown under the contact's form.
contact_page_panels: list[Callable[[HttpRequest, Contact], str]] = []
CLOCK_SOURCE_WORDS = {
    ClockSource.CONTACT: "the contact's own",
    ClockSource.PHONE: "from the phone number",
    ClockSource.ACCOUNT: "the account's",
}


class ContactForm(forms.ModelForm):
    """The services' rules, as form errors: a phone that is no phone number is named, not a server error."""

    tags = TagListField(required=False, help_text="")

    class Meta:
        model = Contact
        fields = ("account", "email", "phone", "first_name", "last_name", "time_zone", "custom_fields", "tags")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        account_id = self.instance.account_id if self.instance.pk else None
        if account_id is None and "account" in self.fields:
            accounts = cast(forms.ModelChoiceField, self.fields["account"]).queryset
            choices = list(accounts.values_list("pk", flat=True)[:2]) if accounts is not None else []
            account_id = choices[0] if len(choices) == 1 else None
        tags = account_tags(account_id=account_id) if account_id else []
        self.fields["time_zone"] = forms.ChoiceField(
            choices=[("", "— from the phone number, else the account's —"), *time_zone_choices()],
            required=False,
            label="Time zone",
            help_text="The contact's own clock: waits until a time of day and send windows read it.",
        )
        self.fields["tags"].widget = TagListWidget(tags, attrs={"placeholder": "e.g. vip, newsletter"})
        if self.instance.pk:
            self.initial["tags"] = list(self.instance.tags or [])

    def clean_phone(self) -> str:
        try:
            return normalize_phone(self.cleaned_data.get("phone") or "")
        except ContactError as error:
            raise forms.ValidationError(error.reason) from None

    def clean_time_zone(self) -> str:
        try:
            return normalize_time_zone(self.cleaned_data.get("time_zone") or "")
        except ContactError as error:
            raise forms.ValidationError(error.reason) from None

    def clean_tags(self) -> list[str]:
        tags = self.cleaned_data.get("tags") or []
        for tag in tags:  # a bad tag is named
            try:
                normalize_tag(tag)
            except ContactError as error:
                raise forms.ValidationError(f"“{tag}”: {error.reason}") from None
        try:
            return normalize_tags(tags)  # and the list as a whole (at most MAX_TAGS)
        except ContactError as error:
            raise forms.ValidationError(error.reason) from None

    def clean(self) -> dict:
        data = super().clean() or {}
        if "phone" in data and "email" in data:
            try:
                check_reachable(data["email"] or "", data["phone"] or "")
            except ContactError as error:
                self.add_error(error.field, error.reason)
        return data


class ConsentChangeInline(admin.TabularInline):
    model = ConsentChange
    extra = 0
    can_delete = False
    readonly_fields = ("channel", "opted_out", "source", "detail", "created_at")

    def has_add_permission(self, request, obj=None):
        return False


class TagFilter(admin.SimpleListFilter):
    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        ids = allowed_account_ids(request)
        accounts = (
            sorted(ids)
            if ids is not None
            else list(model_admin.model.objects.values_list("account_id", flat=True).distinct()[:20])
        )
        tags = sorted({tag for account_id in accounts[:20] for tag in account_tags(account_id=account_id, limit=200)})
        return [(tag, tag) for tag in tags]

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        value = self.value()
        if not value:
            return queryset
        try:
            return with_tag(queryset, value)
        except ContactError:
            return queryset.none()


class TagActionForm(forms.Form):
    tag = forms.CharField(
        max_length=64, label="Tag", widget=forms.TextInput(attrs={"class": "vTextField", "autofocus": True})
    )

    def clean_tag(self) -> str:
        try:
            return normalize_tag(self.cleaned_data["tag"])
        except ContactError as error:
            raise forms.ValidationError(error.reason) from None


@admin.register(Contact)
class ContactAdmin(AccountScopedAdmin):  # a staff user sees their accounts' contacts only
    list_display = ("email", "phone", "first_name", "last_name", "tag_list", "account", "unsubscribed", "sms_opted_out")
    list_filter = (TagFilter, ("account", admin.RelatedOnlyFieldListFilter), "unsubscribed", "sms_opted_out")
    search_fields = ("email", "phone", "first_name", "last_name")
    readonly_fields = ("resolved_time_zone", "unsubscribed", "sms_opted_out", "created_at", "updated_at")
    inlines = [ConsentChangeInline]
    form = ContactForm
    # Bulk tagging is a change ("change"). An export hands over every contact's data: a role that may export
    # (owner, admin, marketer; not a viewer), and Django's contacts.export_contact (not view-only staff).
    account_roles = {
        **dict.fromkeys(("add", "change", "delete"), Permission.MANAGE_CONTACTS),
        "export": Permission.EXPORT_CONTACTS,
    }
    actions = ["add_tag", "remove_tag", "export_csv"]
    change_list_template = "admin/contacts/contact/change_list.html"

    @admin.display(description="tags")
    def tag_list(self, contact: Contact) -> str:
        return ", ".join(contact.tags or []) or "—"

    @admin.display(description="time zone in use")
    def resolved_time_zone(self, contact: Contact) -> str:
        if contact.pk is None:
            return "—"
        clock = contact_clock(contact)
        return f"{clock.time_zone} ({CLOCK_SOURCE_WORDS[clock.source]})"

    change_form_template = "admin/contacts/contact/change_form.html"

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None):
        contact = self.get_object(request, object_id)
        panels = [panel(request, contact) for panel in contact_page_panels] if contact is not None else []
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), "panels": panels})

    def save_model(self, request, obj, form, change):
        check_account(request, obj)
        data = form.cleaned_data
        if not change:
            fields = {name: data[name] for name in EDITABLE_FIELDS}
            created = contact_create(
                account_id=data["account"].pk,
                custom_fields=data.get("custom_fields") or {},
                tags=data.get("tags") or [],
                **fields,
            )
            obj.pk, obj.tags = created.pk, created.tags
            return
        changed = {name: data[name] for name in (*EDITABLE_FIELDS, "custom_fields") if name in form.changed_data}
        if changed:
            contact_update(contact_id=obj.pk, fields=changed, merge_custom_fields=False)
        if "tags" in form.changed_data:
            before = set(Contact.objects.get(pk=obj.pk).tags)
            after = set(data.get("tags") or [])
            for tag in sorted(after - before):
                contact_add_tag(contact_id=obj.pk, tag=tag)
            for tag in sorted(before - after):
                contact_remove_tag(contact_id=obj.pk, tag=tag)

    def get_deleted_objects(self, objs, request):
        """A contact's runs, logs and consent history go with it, whoever may edit those on their own (the
        run admin allows no deletes): the same as deleting it through the API."""
        deleted, counts, _perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, counts, set(), protected

    def delete_model(self, request, obj):
        """Through the service: `contact.deleted` stops the contact's runs and jobs, locks in the usual order."""
        check_account(request, obj)
        contact_delete(contact_id=obj.pk)

    def delete_queryset(self, request, queryset):
        for contact in queryset.order_by("pk"):
            self.delete_model(request, contact)

    # --- bulk tags: the same service (and events) as POST /contacts/{id}/tags ------------------------
    @admin.action(description="Add a tag to the selected contacts…", permissions=["change"])
    def add_tag(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        return self._tag_action(request, queryset, add=True)

    @admin.action(description="Remove a tag from the selected contacts…", permissions=["change"])
    def remove_tag(self, request: HttpRequest, queryset: Any) -> HttpResponse | None:
        return self._tag_action(request, queryset, add=False)

    def _tag_action(self, request: HttpRequest, queryset: Any, *, add: bool) -> HttpResponse | None:
        form = TagActionForm(request.POST if "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            tag = form.cleaned_data["tag"]
            changed = unchanged = 0
            refused: dict[str, int] = {}
            for contact_id in queryset.order_by("pk").values_list("pk", flat=True):
                service = contact_add_tag if add else contact_remove_tag
                try:
                    _, did = service(contact_id=contact_id, tag=tag)
                except ContactError as error:  # the contact has MAX_TAGS tags already: it is left as it was
                    refused[error.reason] = refused.get(error.reason, 0) + 1
                    continue
                changed, unchanged = changed + did, unchanged + (not did)
            verb = "added to" if add else "removed from"
            note = f" ({unchanged} {'already had it' if add else 'did not have it'})" if unchanged else ""
            why = "".join(f" {n} not: {reason}." for reason, n in refused.items())
            level = messages.WARNING if refused else messages.SUCCESS
            self.message_user(request, f"Tag “{tag}” {verb} {changed} contact(s){note}.{why}", level)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Add a tag" if add else "Remove a tag",
            "form": form,
            "contacts": queryset[:20],
            "count": queryset.count(),
            "action": "add_tag" if add else "remove_tag",
            "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
            "select_across": request.POST.get("select_across", "0"),
            "opts": self.model._meta,
            "add": add,
        }
        return TemplateResponse(request, "admin/contacts/contact/tag_action.html", context)

    # --- export: audited, for the roles that may export ------------------------------------------------
    def has_export_permission(self, request: HttpRequest, obj: Contact | None = None) -> bool:
        return request.user.has_perm("contacts.export_contact") and self.role_allows(request, "export", obj)

    @admin.action(description="Export the selected contacts (CSV)", permissions=["export"])
    def export_csv(self, request: HttpRequest, queryset: Any) -> HttpResponseBase:
        return self._export(request, queryset, ExportFormat.CSV, via="selection")

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        extra = {"has_export_permission": self.has_export_permission(request)}
        return super().changelist_view(request, {**(extra_context or {}), **extra})

    def _export(self, request: HttpRequest, queryset: Any, export_format: ExportFormat, via: str) -> HttpResponseBase:
        export = contacts_export(contacts=queryset, export_format=export_format, actor_id=request.user.pk, via=via)
        response: HttpResponseBase
        if isinstance(export.content, bytes):
            response = HttpResponse(export.content, content_type=export.content_type)
        else:
            response = StreamingHttpResponse(export.content, content_type=export.content_type)
        response["Content-Disposition"] = f'attachment; filename="{export.filename}"'
        return response

    def get_urls(self):
        return [
            path("export/", self.admin_site.admin_view(self.export_view), name="contacts_contact_export"),
            path(
                "import/",
                self.admin_site.admin_view(lambda request: admin_imports.upload_view(self, request)),
                name="contacts_contact_import",
            ),
            path(
                "import/<int:import_id>/",
                self.admin_site.admin_view(
                    lambda request, import_id: admin_imports.detail_view(self, request, import_id)
                ),
                name="contacts_contact_import_detail",
            ),
            *super().get_urls(),
        ]

    def export_view(self, request: HttpRequest) -> HttpResponseBase:
        """The list as filtered and searched on the page, every page of it (?format=xlsx for Excel), of the
        accounts where the user's role may export."""
        if not self.has_view_permission(request):
            return HttpResponseRedirect(reverse("admin:index"))
        if not self.has_export_permission(request):
            raise PermissionDenied("Your role does not export contacts.")
        export_format = ExportFormat.XLSX if request.GET.get("format") == "xlsx" else ExportFormat.CSV
        if "format" in request.GET:  # not a filter of the list: the changelist would refuse it
            query = request.GET.copy()
            del query["format"]
            request.GET = query  # type: ignore[assignment]  # the changelist reads its filters from request.GET
        listed = self.get_changelist_instance(request).get_queryset(request)
        return self._export(
            request, scope(listed, request, permission=Permission.EXPORT_CONTACTS), export_format, "list"
        )
