"""Send windows and frequency caps in the admin, in a marketer's words (issue 23 section 5).

Three layers use these pieces: the account's sending settings (this app's admin), a workflow's overrides and a
send step's overrides (`workflows.admin_forms`). Forms gather, the domain decides: each group of fields becomes
the JSON the sending rules read (`integrations.domain.sending.settings`), the domain's own parser checks it, and
every problem it names by path (`send_windows.sms.hours[1]`, `frequency_caps[0].max`) is put on the field that
path belongs to, so no rule is written twice.

A window is a choice (the layer under decides, any time, a legal preset by name, or custom days and hours) with
its details; a cap is a row: at most N messages per so many hours (rolling) or days (calendar days on the
contact's clock), on one channel or all, counting transactional messages or not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from django import forms

from integrations.application.sending_rules import account_sending_settings
from integrations.domain.sending.caps import MAX_CAP_HOURS, MAX_CAP_LIMIT
from integrations.domain.sending.message import Channel
from integrations.domain.sending.problems import Problem, Problems
from integrations.domain.sending.settings import (
    parse_account_settings,
    parse_step_rules,
    parse_workflow_rules,
    resolve,
)
from integrations.domain.sending.windows import DEFAULT_SPREAD_SECONDS, MAX_SPREAD_SECONDS, PRESETS, WINDOW_KEYS
from integrations.infrastructure.models import SendingSettings

CHANNELS: dict[str, str] = {"email": "Email", "sms": "SMS", "voice": "Voice calls"}
DAYS = [("mon", "Mon"), ("tue", "Tue"), ("wed", "Wed"), ("thu", "Thu"), ("fri", "Fri"), ("sat", "Sat"), ("sun", "Sun")]
PRESET_TITLES = {"us_federal": "US federal", "us_fl": "US, Florida", "fr": "France"}
PRESET_SOURCES = {
    "us_federal": "US federal, 47 CFR 64.1200(c)(1)",
    "us_fl": "US, Florida, Fla. Stat. 501.616(6)(a)",
    "fr": "France, the SMS marketing code of conduct",
}
CAP_ROWS = 5  # rows shown for caps; a layer that stores more keeps them (the rows are then read-only)

INHERIT = ""  # the layer under decides (the account: the built-in default)
NO_WINDOW = "none"
CUSTOM = "custom"
CAPS_INHERIT, CAPS_NONE, CAPS_THESE = "", "none", "these"

_INDEX = re.compile(r"\[(\d+)\]")


def preset_label(name: str) -> str:
    preset = PRESETS[name]
    return f"{PRESET_TITLES.get(name, name)}: {preset.window.describe()}"


# --- a window ----------------------------------------------------------------------------------------------
def window_fields(prefix: str, *, label: str, inherit: str) -> dict[str, forms.Field]:
    """The fields of one window: `<prefix>window` (the choice) and its custom days, hours, holidays, spread."""
    presets = [(name, preset_label(name)) for name in PRESETS]
    return {
        f"{prefix}window": forms.ChoiceField(
            label=label,
            required=False,
            choices=[
                (INHERIT, inherit),
                (NO_WINDOW, "Any time (no send window)"),
                *presets,
                (CUSTOM, "Custom days and hours"),
            ],
            help_text="When a message may leave, on the contact's own clock; outside it, the message waits for "
            "the next opening (it is never dropped). Presets: " + "; ".join(PRESET_SOURCES.values()) + ".",
        ),
        f"{prefix}days": forms.MultipleChoiceField(
            label="Days",
            required=False,
            choices=DAYS,
            widget=forms.CheckboxSelectMultiple,
            help_text="Custom window: the days messages may go.",
        ),
        f"{prefix}hours": forms.CharField(
            label="Hours",
            required=False,
            max_length=200,
            help_text="Custom window: 24-hour spans, separated by commas, e.g. 09:00-13:00, 14:00-20:00 (end 24:00 "
            "for midnight).",
        ),
        f"{prefix}holidays": forms.CharField(
            label="Holidays",
            required=False,
            widget=forms.Textarea(attrs={"rows": 2, "cols": 24}),
            help_text="No messages on these dates: one a line, YYYY-MM-DD (with a preset too).",
        ),
        f"{prefix}fr_holidays": forms.BooleanField(
            label="Not on French public holidays", required=False, help_text="Computed every year (with a preset too)."
        ),
        f"{prefix}spread": forms.IntegerField(
            label="Spread each opening over (minutes)",
            required=False,
            min_value=0,
            max_value=MAX_SPREAD_SECONDS // 60,
            help_text=f"Messages that waited leave over the first minutes of the opening, not all at once "
            f"(default {DEFAULT_SPREAD_SECONDS // 60}).",
        ),
    }


def window_value(data: Mapping[str, Any], prefix: str) -> tuple[bool, Any]:
    """(set, value) for the window the cleaned fields describe: not set (the layer under decides), None (any
    time), a preset's name, or a window object as `parse_window` reads it."""
    choice = data.get(f"{prefix}window") or INHERIT
    if choice == INHERIT:
        return False, None
    if choice == NO_WINDOW:
        return True, None
    value: dict[str, Any] = {}
    if choice == CUSTOM:
        value["days"] = list(data.get(f"{prefix}days") or [])
        value["hours"] = [span.strip() for span in (data.get(f"{prefix}hours") or "").split(",") if span.strip()]
    else:
        value["preset"] = choice
    holidays = [line.strip() for line in (data.get(f"{prefix}holidays") or "").splitlines() if line.strip()]
    if holidays:
        value["holidays"] = holidays
    if data.get(f"{prefix}fr_holidays"):
        value["holiday_calendars"] = ["FR"]
    spread = data.get(f"{prefix}spread")
    if spread is not None:
        value["spread"] = int(spread) * 60
    if list(value) == ["preset"]:
        return True, choice  # a preset as it is: its name
    return True, value


def window_initial(value: Any, prefix: str, *, is_set: bool = True) -> dict[str, Any]:
    """The fields' initial values for a stored window (what `window_value` would give back)."""
    if not is_set:
        return {f"{prefix}window": INHERIT}
    if value is None:
        return {f"{prefix}window": NO_WINDOW}
    if isinstance(value, str):
        return {f"{prefix}window": value}
    if not isinstance(value, Mapping):
        return {f"{prefix}window": INHERIT}
    initial: dict[str, Any] = {f"{prefix}window": value.get("preset") or CUSTOM}
    days = value.get("days")
    if isinstance(days, list | str):
        initial[f"{prefix}days"] = _day_names(days if isinstance(days, list) else [days])
    hours = value.get("hours")
    if isinstance(hours, list):
        initial[f"{prefix}hours"] = ", ".join(str(h) for h in hours)
    elif isinstance(hours, str):
        initial[f"{prefix}hours"] = hours
    if isinstance(value.get("holidays"), list):
        initial[f"{prefix}holidays"] = "\n".join(str(d) for d in value["holidays"])
    calendars = value.get("holiday_calendars")
    initial[f"{prefix}fr_holidays"] = isinstance(calendars, list) and "FR" in [str(c).upper() for c in calendars]
    if isinstance(value.get("spread"), int):
        initial[f"{prefix}spread"] = value["spread"] // 60
    return initial


def _day_names(items: Iterable[Any]) -> list[str]:
    """Day names and ranges ("mon-fri") as the checkboxes' values."""
    names = [name for name, _ in DAYS]
    chosen: list[str] = []
    for item in items:
        first, _, last = str(item).strip().lower().partition("-")
        if first not in names or (last and last not in names):
            continue
        start, stop = names.index(first), names.index(last or first)
        span = range(start, stop + 1) if stop >= start else [*range(start, 7), *range(0, stop + 1)]
        chosen += [names[i] for i in span if names[i] not in chosen]
    return chosen


# --- caps --------------------------------------------------------------------------------------------------
def caps_fields(prefix: str, *, mode: str | None, rows: int = CAP_ROWS) -> dict[str, forms.Field]:
    """CAP_ROWS rows of `<prefix>cap<i>_<field>`; with `mode` (a workflow, a step), first the choice between
    the layer under (`mode` is its words), no caps, or these."""
    fields: dict[str, forms.Field] = {}
    if mode is not None:
        fields[f"{prefix}caps"] = forms.ChoiceField(
            label="Frequency caps",
            required=False,
            choices=[(CAPS_INHERIT, mode), (CAPS_NONE, "No caps"), (CAPS_THESE, "These caps instead")],
            widget=forms.RadioSelect,
        )
    for i in range(rows):
        row = f"{prefix}cap{i}_"
        fields[f"{row}max"] = forms.IntegerField(
            label=f"Cap {i + 1}: at most", required=False, min_value=1, max_value=MAX_CAP_LIMIT
        )
        fields[f"{row}every"] = forms.IntegerField(
            label="marketing messages per", required=False, min_value=1, max_value=MAX_CAP_HOURS
        )
        fields[f"{row}unit"] = forms.ChoiceField(
            label="period",
            required=False,
            choices=[("days", "calendar days (the contact's clock)"), ("hours", "hours (rolling)")],
        )
        fields[f"{row}channel"] = forms.ChoiceField(
            label="counting",
            required=False,
            choices=[("all", "all channels together"), *[(c, f"{w} only") for c, w in CHANNELS.items()]],
        )
        fields[f"{row}transactional"] = forms.BooleanField(label="count transactional messages too", required=False)
    return fields


def caps_value(data: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The caps the filled rows describe (a row with no number is empty), as `parse_caps` reads them."""
    caps = []
    for i in range(CAP_ROWS):
        row = f"{prefix}cap{i}_"
        limit, every = data.get(f"{row}max"), data.get(f"{row}every")
        if limit is None and every is None:
            continue
        cap: dict[str, Any] = {"max": limit}
        if every is not None:
            cap[data.get(f"{row}unit") or "days"] = every
        if (data.get(f"{row}channel") or "all") != "all":
            cap["channel"] = data[f"{row}channel"]
        if data.get(f"{row}transactional"):
            cap["include_transactional"] = True
        caps.append(cap)
    return caps


def caps_initial(caps: Any, prefix: str) -> dict[str, Any]:
    initial: dict[str, Any] = {}
    if not isinstance(caps, list):
        return initial
    for i, cap in enumerate(caps[:CAP_ROWS]):
        if not isinstance(cap, Mapping):
            continue
        row = f"{prefix}cap{i}_"
        unit = "hours" if "hours" in cap else "days"
        initial.update(
            {
                f"{row}max": cap.get("max"),
                f"{row}every": cap.get(unit),
                f"{row}unit": unit,
                f"{row}channel": cap.get("channel", "all"),
                f"{row}transactional": bool(cap.get("include_transactional")),
            }
        )
    return initial


def when_capped_field(*, inherit: str | None) -> forms.ChoiceField:
    choices = [
        ("defer", "Wait until the contact is under the cap again, then send"),
        ("skip", "Skip the message (the step is logged skipped, the run goes on)"),
    ]
    return forms.ChoiceField(
        label="Over a cap",
        required=inherit is None,
        choices=[(INHERIT, inherit), *choices] if inherit is not None else choices,
        widget=forms.RadioSelect,
    )


# --- problems onto fields ------------------------------------------------------------------------------------
_WINDOW_PART = {"days": "days", "hours": "hours", "holidays": "holidays", "holiday_calendars": "fr_holidays"}
_WINDOW_PART |= {"spread": "spread", "preset": "window"}
_CAP_PART = {"max": "max", "hours": "every", "days": "every", "channel": "channel"}
_CAP_PART["include_transactional"] = "transactional"
assert set(_WINDOW_PART) == set(WINDOW_KEYS)


def problem_field(
    problem: Problem, *, windows: Mapping[str, str], caps: str | None, fields: Iterable[str], prefix: str = ""
) -> str | None:
    """The form field a problem's path belongs to: `windows` maps a window's path ("send_windows.sms") to its
    fields' prefix, `caps` is the caps rows' prefix; a top-level key names its own field. None: the form's."""
    path, known = problem.path, set(fields)
    for where, prefix in windows.items():
        if path == where or path.startswith(f"{where}."):
            part = path[len(where) + 1 :].split(".")[0].split("[")[0]
            name = f"{prefix}{_WINDOW_PART.get(part, 'window')}"
            return name if name in known else None
    if caps is not None and path.startswith("frequency_caps"):
        found = _INDEX.search(path)
        index = int(found[1]) if found else 0
        part = path.rsplit(".", 1)[1] if found and "." in path[found.end() :] else ""
        name = f"{caps}cap{index}_{_CAP_PART.get(part, 'every' if found else 'max')}"
        if index >= CAP_ROWS or name not in known:
            name = f"{caps}caps" if f"{caps}caps" in known else f"{caps}cap0_max"
        return name if name in known else None
    top = prefix + path.split(".")[0].split("[")[0]
    return top if top in known else None


def problem_words(problem: Problem, items: int = 0) -> str:
    """A problem's reason, saying which item of a list it is about when there are several ("Item 2: ...")."""
    found = _INDEX.findall(problem.path.rsplit(".", 1)[-1])
    if found and items > 1 and "frequency_caps[" not in problem.path.rsplit(".", 1)[-1]:
        return f"Item {int(found[-1]) + 1}: {problem.reason}"
    return problem.reason[:1].upper() + problem.reason[1:]


def _items(form: forms.BaseForm, name: str) -> int:
    """How many items the field was given (spans separated by commas, dates one a line)."""
    raw = form.data.get(form.add_prefix(name), "") if form.is_bound else ""
    return len([item for item in re.split(r"[,\n]", str(raw)) if item.strip()])


def put_problems(
    form: forms.BaseForm,
    problems: Iterable[Problem],
    *,
    windows: Mapping[str, str],
    caps: str | None,
    prefix: str = "",
) -> None:
    """Each problem on the field it names (or the form's, when it names none); a field the form already found
    wrong (in plainer words) keeps its own error."""
    for problem in problems:
        name = problem_field(problem, windows=windows, caps=caps, fields=form.fields, prefix=prefix)
        if name is not None and name in form.errors:
            continue
        form.add_error(name, problem_words(problem, _items(form, name)) if name else str(problem))


def check_custom_window(form: forms.BaseForm, data: Mapping[str, Any], prefix: str) -> None:
    """A custom window needs its days and hours: said in the form's words, before the rules are asked."""
    if data.get(f"{prefix}window") != CUSTOM:
        return
    if not data.get(f"{prefix}days"):
        form.add_error(f"{prefix}days", "Tick at least one day for a custom window.")
    if not (data.get(f"{prefix}hours") or "").strip():
        form.add_error(f"{prefix}hours", "Give the hours for a custom window, e.g. 09:00-20:00.")


# --- the account's settings page -----------------------------------------------------------------------------
def _account_fields() -> dict[str, forms.Field]:
    fields: dict[str, forms.Field] = {}
    for channel, words in CHANNELS.items():
        default = "the built-in default: " + (
            "any time" if channel == "email" else f"{preset_label('us_federal')} (for marketing)"
        )
        fields |= window_fields(f"{channel}_", label=f"{words}: send window", inherit=f"Not set ({default})")
        if channel != "email":
            fields[f"{channel}_window"].help_text = ""  # said once, on the first window
    fields |= caps_fields("", mode=None)
    fields["when_capped"] = when_capped_field(inherit=None)
    return fields


class SendingMedia:
    """The script that shows a window's details only when they apply (every field shows without it)."""

    js = ("integrations/sending_forms.js",)


class _SendingSettingsForm(forms.ModelForm):
    """An account's send windows (one per channel), its frequency caps and what happens over a cap."""

    Media = SendingMedia

    class Meta:
        model = SendingSettings
        fields = ["account"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        instance = self.instance
        stored_windows = instance.send_windows if isinstance(instance.send_windows, dict) else {}
        initial: dict[str, Any] = {"when_capped": instance.when_capped or "defer"}
        for channel in CHANNELS:
            initial |= window_initial(stored_windows.get(channel), f"{channel}_", is_set=channel in stored_windows)
        initial |= caps_initial(instance.frequency_caps, "")
        self.caps_kept = isinstance(instance.frequency_caps, list) and len(instance.frequency_caps) > CAP_ROWS
        if self.caps_kept:  # more caps than rows (set through the API): shown, kept as they are
            for name in self.fields:
                if re.match(r"cap\d+_", name):
                    self.fields[name].disabled = True
        for name, value in initial.items():
            self.initial.setdefault(name, value)
        self.document: dict[str, Any] = {}

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        windows: dict[str, Any] = {}
        for channel in CHANNELS:
            check_custom_window(self, data, f"{channel}_")
            is_set, value = window_value(data, f"{channel}_")
            if is_set:
                windows[channel] = value
        caps = self.instance.frequency_caps if self.caps_kept else caps_value(data, "")
        self.document = {"send_windows": windows, "frequency_caps": caps, "when_capped": data.get("when_capped")}
        problems = Problems()
        parse_account_settings(self.document, "", problems)
        put_problems(
            self,
            problems,
            windows={f"send_windows.{c}": f"{c}_" for c in CHANNELS},
            caps=None if self.caps_kept else "",
        )
        return data

    def save(self, commit: bool = True) -> Any:
        self.instance.send_windows = self.document["send_windows"]
        self.instance.frequency_caps = self.document["frequency_caps"]
        self.instance.when_capped = self.document["when_capped"]
        return super().save(commit)


def declare_fields(form_class: type[forms.BaseForm], fields: Mapping[str, forms.Field]) -> None:
    """Add fields to a form class as if declared in its body: the admin builds its form from the class's
    declared fields, so its fieldsets may then name them (fields made in `__init__` they could not)."""
    form_class.base_fields.update(fields)  # type: ignore[attr-defined]
    form_class.declared_fields.update(fields)  # type: ignore[attr-defined]


class SendingSettingsForm(_SendingSettingsForm):
    pass


declare_fields(SendingSettingsForm, _account_fields())


def account_fieldsets() -> list[tuple[str, dict[str, Any]]]:
    """The settings page's sections: the account, a window per channel, the caps."""
    window_parts = ("window", "days", "hours", "holidays", "fr_holidays", "spread")
    sets: list[tuple[str, dict[str, Any]]] = [("", {"fields": ["account"]})]
    for channel, words in CHANNELS.items():
        sets.append((f"{words}: when messages may go", {"fields": [f"{channel}_{p}" for p in window_parts]}))
    rows = [tuple(f"cap{i}_{p}" for p in ("max", "every", "unit", "channel", "transactional")) for i in range(CAP_ROWS)]
    caps_help = (
        "At most so many marketing messages per contact in a period, all channels together or one. A message "
        "over a cap waits until the contact is under it again (or is skipped, if you choose so). Transactional "
        "messages are never held back by a cap; ticked, they use up the allowance. Leave a row empty for no cap."
    )
    sets.append(("How often a contact may be contacted", {"fields": [*rows, "when_capped"], "description": caps_help}))
    return sets


def in_force_lines(account_id: int) -> list[str]:
    """What a marketing message of each channel obeys under the account's settings (no workflow overrides), in
    words: its window, or any time; the caps, and what happens over one."""
    account = account_sending_settings(account_id=account_id)
    lines = []
    for channel, words in CHANNELS.items():
        _purpose, rules = resolve(account=account, channel=Channel(channel))
        window = rules.window.describe() if rules.window is not None else "any time"
        lines.append(f"{words}: {window}")
    if account.caps:
        over = "waits until under it again" if account.when_capped.value == "defer" else "is skipped"
        caps = "; ".join(cap.describe() for cap in account.caps)
        lines.append(f"At most {caps}; a message over a cap {over}")
    else:
        lines.append("No frequency cap")
    return lines


# --- a workflow's and a send step's overrides ------------------------------------------------------------------
PURPOSES = [
    ("marketing", "Marketing: every rule applies (consent, send windows, frequency caps)"),
    (
        "transactional",
        "Transactional (a receipt, a password reset): never held back by a cap, reaches contacts unsubscribed "
        "from marketing email; never an opted-out phone",
    ),
]


def layer_fields(prefix: str, *, channels: bool, under: str, cap_rows: int = CAP_ROWS) -> dict[str, forms.Field]:
    """The override fields of a workflow (`channels`: a window for all its messages and one per channel, the
    explicit transactional exemption) or of one send step (one window). `under`: what decides when unset."""
    fields: dict[str, forms.Field] = {
        f"{prefix}purpose": forms.ChoiceField(
            label="These messages are",
            required=False,
            choices=[("", f"As {under} says (marketing unless said otherwise)"), *PURPOSES],
        )
    }
    if channels:
        fields[f"{prefix}transactional_exempt"] = forms.BooleanField(
            label="Transactional messages may go outside the send window",
            required=False,
            help_text="An explicit choice: left unticked, transactional messages keep to the window like the rest.",
        )
        fields |= window_fields(f"{prefix}all_", label="Send window, every channel", inherit=f"As {under} says")
        for channel, words in CHANNELS.items():
            fields |= window_fields(
                f"{prefix}{channel}_", label=f"{words}: send window", inherit="As above, else as the account says"
            )
            fields[f"{prefix}{channel}_window"].help_text = ""  # said once, on the first window
    else:
        fields |= window_fields(f"{prefix}all_", label="Send window for this message", inherit=f"As {under} says")
    fields |= caps_fields(prefix, mode=f"As {under} says", rows=cap_rows)
    fields[f"{prefix}when_capped"] = when_capped_field(inherit=f"As {under} says")
    return fields


def layer_windows(prefix: str, *, channels: bool) -> dict[str, str]:
    """Each window's path in the layer's document, to its fields' prefix."""
    windows = {"send_window": f"{prefix}all_"}
    if channels:
        windows |= {f"send_windows.{channel}": f"{prefix}{channel}_" for channel in CHANNELS}
    return windows


def layer_document(form: forms.BaseForm, data: Mapping[str, Any], prefix: str, *, channels: bool) -> dict[str, Any]:
    """The layer's document (only what it sets), with what the form can say plainly already said."""
    document: dict[str, Any] = {}
    if data.get(f"{prefix}purpose"):
        document["purpose"] = data[f"{prefix}purpose"]
    if channels and data.get(f"{prefix}transactional_exempt"):
        document["transactional_window"] = "exempt"
    for path, window_prefix in layer_windows(prefix, channels=channels).items():
        check_custom_window(form, data, window_prefix)
        is_set, value = window_value(data, window_prefix)
        if not is_set:
            continue
        if path == "send_window":
            document["send_window"] = value
        else:
            document.setdefault("send_windows", {})[path.split(".")[1]] = value
    mode = data.get(f"{prefix}caps") or CAPS_INHERIT
    caps = caps_value(data, prefix)
    if mode == CAPS_NONE:
        document["frequency_caps"] = []
    elif mode == CAPS_THESE or (mode == CAPS_INHERIT and caps):
        if not caps:
            form.add_error(f"{prefix}cap0_max", "Fill in at least one cap, or choose another option above.")
        document["frequency_caps"] = caps
    if data.get(f"{prefix}when_capped"):
        document["when_capped"] = data[f"{prefix}when_capped"]
    return document


def layer_initial(document: Any, prefix: str, *, channels: bool) -> dict[str, Any]:
    """The fields' initial values for a stored layer (what `layer_document` would give back)."""
    doc = document if isinstance(document, Mapping) else {}
    initial: dict[str, Any] = {f"{prefix}purpose": doc.get("purpose") or "", f"{prefix}when_capped": ""}
    if isinstance(doc.get("when_capped"), str):
        initial[f"{prefix}when_capped"] = doc["when_capped"]
    if channels:
        initial[f"{prefix}transactional_exempt"] = doc.get("transactional_window") == "exempt"
    initial |= window_initial(doc.get("send_window"), f"{prefix}all_", is_set="send_window" in doc)
    if channels:
        found = doc.get("send_windows")
        per_channel: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        for channel in CHANNELS:
            initial |= window_initial(per_channel.get(channel), f"{prefix}{channel}_", is_set=channel in per_channel)
    if "frequency_caps" in doc:
        caps = doc["frequency_caps"]
        initial[f"{prefix}caps"] = CAPS_NONE if caps == [] else CAPS_THESE
        initial |= caps_initial(caps, prefix)
    else:
        initial[f"{prefix}caps"] = CAPS_INHERIT
    return initial


def layer_fieldsets(prefix: str, *, channels: bool, title: str) -> list[tuple[str, Any]]:
    """The override fields grouped as the admin shows them (collapsed: most workflows keep the account's)."""
    window_parts = ("window", "days", "hours", "holidays", "fr_holidays", "spread")
    windows = [f"{prefix}all_{part}" for part in window_parts]
    if channels:
        windows += [f"{prefix}{c}_{part}" for c in CHANNELS for part in window_parts]
    rows = [
        tuple(f"{prefix}cap{i}_{p}" for p in ("max", "every", "unit", "channel", "transactional"))
        for i in range(CAP_ROWS)
    ]
    top = [f"{prefix}purpose", *([f"{prefix}transactional_exempt"] if channels else [])]
    description = (
        "Leave these as they are to keep the account's sending settings. What you set here wins for this "
        "workflow's messages; the next message obeys it, no need to publish."
    )
    return [
        (
            title,
            {
                "fields": [*top, *windows, f"{prefix}caps", *rows, f"{prefix}when_capped"],
                "classes": ("collapse",),
                "description": description,
            },
        )
    ]


def layer_problems(form: forms.BaseForm, document: Mapping[str, Any], prefix: str, *, channels: bool) -> None:
    """Ask the rules' own parser about the layer's document and put each problem on its field."""
    problems = Problems()
    if channels:
        parse_workflow_rules(document, "", problems)
    else:
        parse_step_rules(document, "", problems)
    put_problems(form, problems, windows=layer_windows(prefix, channels=channels), caps=prefix, prefix=prefix)
