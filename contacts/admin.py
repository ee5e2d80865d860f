"""Contacts in the admin. Saving goes through the contact services, so a marketer's edit emits the
same events as the API's (and starts the same workflows)."""

from django.contrib import admin

from accounts.admin_scoping import AccountScopedAdmin, check_account
from contacts.application.services import (
    EDITABLE_FIELDS,
    contact_add_tag,
    contact_create,
    contact_remove_tag,
    contact_update,
)
from contacts.infrastructure.models import ConsentChange, Contact


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
