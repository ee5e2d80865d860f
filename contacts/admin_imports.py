"""Importing contacts in the admin: upload a CSV or XLSX, map its columns, check it, import it (all or nothing).

The pages call `contacts.application.imports`; the work runs on the queue and the import's page follows it.
Other apps offer something to do with the imported contacts (`import_follow_ups`: the workflow engine offers
"enroll them into a workflow"), queued in the import's own transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse

from accounts.admin_scoping import role_account_ids
from accounts.infrastructure.models import Account
from contacts.application.imports import (
    ImportRefused,
    check_file_size,
    import_configure,
    import_queue,
    import_upload,
)
from contacts.application.selectors import account_custom_fields
from contacts.domain.imports import CUSTOM_PREFIX, FIELDS, TAGS, read_row
from contacts.infrastructure.models import ContactImport
from contacts.infrastructure.spreadsheets import ENCODING_NAMES
from jobs.public import JobSpec

TARGET_LABELS = {"": "— skip this column —", "email": "Email", "phone": "Phone", "first_name": "First name"}
TARGET_LABELS.update(
    {"last_name": "Last name", "time_zone": "Time zone (e.g. Europe/Paris)", TAGS: "Tags (comma separated)"}
)


@dataclass(frozen=True)
class ImportFollowUp:
    """Something to do with the imported contacts, offered on the mapping page by another app."""

    name: str
    field: Callable[[int], forms.Field]  # account id -> the form field (blank: do nothing)
    jobs: Callable[..., list[JobSpec]]  # (value, import_id=, account_id=, user_id=) -> jobs to queue after
    # (request, value) -> why this user may not ask for it ("": they may), checked when the mapping is submitted
    refusal: Callable[[HttpRequest, Any], str] = lambda request, value: ""


import_follow_ups: list[ImportFollowUp] = []


class UploadForm(forms.Form):
    account = forms.ModelChoiceField(queryset=Account.objects.none(), empty_label=None)
    file = forms.FileField(
        label="CSV or Excel file", help_text="The first row names the columns: email, phone, first name, tags…"
    )

    def __init__(self, *args: Any, accounts: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ModelChoiceField, self.fields["account"]).queryset = accounts
        if accounts.count() == 1:
            self.fields["account"].widget = forms.HiddenInput()
            self.fields["account"].initial = accounts.first()


class MappingForm(forms.Form):
    existing = forms.ChoiceField(
        label="Contacts already in Relay (same email)",
        choices=[("update", "Update them with the file's values"), ("skip", "Leave them as they are")],
        widget=forms.RadioSelect,
        initial="update",
    )
    tag = forms.CharField(
        label="Tag everyone imported with",
        required=False,
        max_length=64,
        help_text="Optional, e.g. webinar-2026: a list you can filter on, and a trigger for workflows.",
    )

    def __init__(self, *args: Any, record: ContactImport, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.record = record
        in_use = account_custom_fields(account_id=record.account_id)
        base = list(TARGET_LABELS.items())
        existing_custom = [(f"{CUSTOM_PREFIX}{name}", f"Custom field: {name}") for name in in_use]
        for index, header in enumerate(record.header):
            guess = record.mapping[index] if index < len(record.mapping) else ""
            choices = [*base, *existing_custom]
            if guess.startswith(CUSTOM_PREFIX) and guess not in dict(choices):
                choices.append((guess, f"New custom field: {guess.removeprefix(CUSTOM_PREFIX)}"))
            self.fields[f"column_{index}"] = forms.ChoiceField(
                label=header or f"Column {index + 1}", choices=choices, initial=guess, required=False
            )
        self.initial.setdefault("existing", record.options.get("existing", "update"))
        self.initial.setdefault("tag", record.options.get("tag", ""))
        for follow_up in import_follow_ups:
            self.fields[f"then_{follow_up.name}"] = follow_up.field(record.account_id)

    def column_fields(self) -> list[forms.BoundField]:
        return [self[f"column_{i}"] for i in range(len(self.record.header))]

    def columns(self) -> list[dict[str, Any]]:
        """Each column's field and its cells in the sample rows: the page shows them without a nested loop
        over every cell of every row (which made it quadratic in the number of columns)."""
        sample = self.record.sample
        return [
            {"field": field, "sample": [row[index] if index < len(row) else "" for row in sample]}
            for index, field in enumerate(self.column_fields())
        ]

    def option_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in self.fields if not name.startswith("column_")]

    def mapping(self) -> list[str]:
        return [self.cleaned_data.get(f"column_{i}") or "" for i in range(len(self.record.header))]


def _accounts(model_admin: Any, request: HttpRequest) -> Any:
    """The accounts where the user's role may import: an import adds and changes contacts."""
    adding = role_account_ids(request, model_admin.role_needed("add"))
    changing = role_account_ids(request, model_admin.role_needed("change"))
    accounts = Account.objects.order_by("name")
    for ids in (adding, changing):
        if ids is not None:
            accounts = accounts.filter(pk__in=ids)
    return accounts


def upload_view(model_admin: Any, request: HttpRequest) -> HttpResponse:
    if not (model_admin.has_add_permission(request) and model_admin.has_change_permission(request)):
        raise Http404("Importing needs the permission to add and change contacts.")
    form = UploadForm(request.POST or None, request.FILES or None, accounts=_accounts(model_admin, request))
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            check_file_size(upload.size)  # before reading a byte of it
            record = import_upload(
                account_id=form.cleaned_data["account"].pk,
                filename=upload.name,
                content=upload.read(),
                created_by_id=request.user.pk,
            )
        except ImportRefused as exc:
            form.add_error("file", str(exc))
        else:
            return HttpResponseRedirect(reverse("admin:contacts_contact_import_detail", args=[record.pk]))
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Import contacts",
        "form": form,
        "opts": model_admin.model._meta,
        "recent": ContactImport.objects.filter(account__in=_accounts(model_admin, request)).defer("content")[:10],
    }
    return TemplateResponse(request, "admin/contacts/contact/import_upload.html", context)


def _follow_up_jobs(request: HttpRequest, form: MappingForm, record: ContactImport) -> list[JobSpec]:
    """The jobs of the follow-ups asked for; one this user may not ask for is refused on its field instead."""
    then: list[JobSpec] = []
    for follow_up in import_follow_ups:
        value = form.cleaned_data.get(f"then_{follow_up.name}")
        if not value:
            continue
        refusal = follow_up.refusal(request, value)
        if refusal:
            form.add_error(f"then_{follow_up.name}", refusal)
            continue
        then += follow_up.jobs(value, import_id=record.pk, account_id=record.account_id, user_id=request.user.pk)
    return then


def detail_view(model_admin: Any, request: HttpRequest, import_id: int) -> HttpResponse:
    record = get_object_or_404(ContactImport.objects.filter(account__in=_accounts(model_admin, request)), pk=import_id)
    may_import = model_admin.has_add_permission(request) and model_admin.has_change_permission(request)
    if not may_import:
        raise Http404("Importing needs the permission to add and change contacts.")
    editable = record.status in (
        ContactImport.Status.UPLOADED,
        ContactImport.Status.CHECKED,
        ContactImport.Status.REFUSED,
    )
    form = MappingForm(request.POST or None, record=record) if editable else None
    if request.method == "POST" and form is not None and form.is_valid():
        then = _follow_up_jobs(request, form, record)
        if form.is_valid():  # a follow-up this user may not ask for is an error on its field
            try:
                import_configure(
                    import_id=record.pk,
                    mapping=form.mapping(),
                    existing=form.cleaned_data["existing"],
                    tag=form.cleaned_data.get("tag") or "",
                    then=then,
                )
                import_queue(import_id=record.pk, dry_run="_check" in request.POST)
            except ImportRefused as exc:
                form.add_error(None, str(exc))
            else:
                verb = "Checking" if "_check" in request.POST else "Importing"
                model_admin.message_user(request, f"{verb} {record.row_count:,} rows…", messages.INFO)
                return HttpResponseRedirect(request.path)
    preview = []
    if form is not None:
        for offset, cells in enumerate(record.sample):
            row, problems = read_row(offset + 2, cells, record.header, record.mapping)
            preview.append({"cells": cells, "row": row, "problems": problems})
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Import of {record.filename}",
        "record": record,
        "form": form,
        "preview": preview,
        "encoding": ENCODING_NAMES.get(record.options.get("encoding", ""), ""),
        "fields": FIELDS,
        "opts": model_admin.model._meta,
        "live": record.status in (ContactImport.Status.QUEUED, ContactImport.Status.CHECKING)
        or (record.follow_up.startswith("Enrolling")),
    }
    return TemplateResponse(request, "admin/contacts/contact/import_detail.html", context)
