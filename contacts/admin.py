from django.contrib import admin

from contacts.infrastructure.models import ConsentChange, Contact


class ConsentChangeInline(admin.TabularInline):
    model = ConsentChange
    extra = 0
    can_delete = False
    readonly_fields = ("channel", "opted_out", "source", "detail", "created_at")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Contact)
class ContactAdmin(admin.ModelAdmin):
    list_display = ("email", "phone", "first_name", "last_name", "account", "unsubscribed", "sms_opted_out")
    list_filter = ("account", "unsubscribed", "sms_opted_out")
    search_fields = ("email", "phone", "first_name", "last_name")
    readonly_fields = ("unsubscribed", "sms_opted_out", "created_at", "updated_at")
    inlines = [ConsentChangeInline]
