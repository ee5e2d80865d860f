"""Tag widgets for the admin: one tag with the account's tags offered as you type, or several as chips."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any

from django import forms


class TagInput(forms.TextInput):
    """One tag, with the account's existing tags offered as you type (a datalist)."""

    template_name = "contacts/widgets/tag_input.html"

    def __init__(
        self, tags: Sequence[str] = (), attrs: dict[str, Any] | None = None, *, list_id: str | None = None
    ) -> None:
        """`list_id`: a datalist the page renders once (the builder's), instead of one per input."""
        super().__init__({"class": "vTextField relay-tag-input", "autocomplete": "off", **(attrs or {})})
        self.tags = list(tags)
        self.list_id = list_id

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        context["widget"]["attrs"]["list"] = self.list_id or f"{context['widget']['attrs'].get('id', name)}-tags"
        context["tags"] = [] if self.list_id else self.tags
        context["own_list"] = not self.list_id
        return context


class TagListWidget(forms.TextInput):
    """Several tags: chips with suggestions in the browser; a comma-separated text without JavaScript."""

    template_name = "contacts/widgets/tag_list.html"

    class Media:
        js = ("contacts/tags.js",)
        css = {"all": ("contacts/tags.css",)}

    def __init__(self, tags: Sequence[str] = (), attrs: dict[str, Any] | None = None) -> None:
        super().__init__({"class": "vTextField relay-tag-list", "autocomplete": "off", **(attrs or {})})
        self.tags = list(tags)

    def format_value(self, value: Any) -> str:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return value
        if isinstance(value, list | tuple):
            return ", ".join(str(tag) for tag in value)
        return "" if value is None else str(value)

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        context["widget"]["attrs"]["list"] = f"{context['widget']['attrs'].get('id', name)}-tags"
        context["tags"] = self.tags
        return context


class TagListField(forms.Field):
    """`vip, Trial ,` -> ["vip", "Trial"]: tags are normalized by the contact services, which name a bad one."""

    widget = TagListWidget

    def to_python(self, value: Any) -> list[str]:
        if isinstance(value, str) and value.strip().startswith("["):
            with contextlib.suppress(ValueError):  # the JSON list the admin took before the chips
                value = json.loads(value)
        if isinstance(value, list):
            return [str(v).strip() for v in value if str(v).strip()]
        return [part.strip() for part in str(value or "").split(",") if part.strip()]

    def has_changed(self, initial: Any, data: Any) -> bool:
        return list(initial or []) != self.to_python(data)
