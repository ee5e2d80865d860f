"""Contacts in the admin. Saving goes through the contact services, so a marketer's edit emits the
same events as the API's (and starts the same workflows)."""

from django import forms
from django.contrib import admin

from accounts.admin_scoping import AccountScopedAdmin, check_account
from accounts.domain.roles import Permission
from contacts.application.services import (
    EDITABLE_FIELDS,
    contact_add_tag,
    contact_create,
    contact_delete,
    contact_remove_tag,
    contact_update,
)
from contacts.domain.model import ContactError, check_reachable, normalize_phone, normalize_tags
from contacts.infrastructure.models import ConsentChange, Contact


class ContactForm(forms.ModelForm):
    """The services' rules, as form errors: a phone that is no phone number is named, not a server error."""

    class Meta:
        model = Contact
        fields = ("account", "email", "phone", "first_name", "last_name", "custom_fields", "tags")

    def clean_phone(self) -> str:
        try:
            return normalize_phone(self.cleaned_data.get("phone") or "")
        except ContactError as error:
            raise forms.ValidationError(error.reason) from None

    def clean_tags(self) -> list[str]:
        try:
            return normalize_tags(self.cleaned_data.get("tags") or [])
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


@admin.register(Contact)
class ContactAdmin(AccountScopedAdmin):  # a staff user sees their accounts' contacts only
    list_display = ("email", "phone", "first_name", "last_name", "account", "unsubscribed", "sms_opted_out")
    list_filter = (("account", admin.RelatedOnlyFieldListFilter), "unsubscribed", "sms_opted_out")
    search_fields = ("email", "phone", "first_name", "last_name")
    readonly_fields = ("unsubscribed", "sms_opted_out", "created_at", "updated_at")
    inlines = [ConsentChangeInline]
    form = ContactForm
    account_roles = dict.fromkeys(("add", "change", "delete"), Permission.MANAGE_CONTACTS)

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
