"""A step in the builder: one form per step type (each type's folder has it), inside one inline form per step.

`StepForm` is the inline's form for a `WorkflowStep`: its position, name and action type, and one config
form per step type of the registry (`STEP_FORMS`); the page shows the config form of the chosen type. A
config the forms cannot show (a setting they do not offer) opens in the advanced JSON view instead, so
nothing is ever lost. `StepFormSet` checks the steps together with the domain's rules and puts each error
next to the field it names, for every step at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, cast

from django import forms
from django.core.exceptions import ValidationError
from django.forms.models import BaseInlineFormSet

from workflows.admin_forms.context import BuilderContext
from workflows.admin_forms.paths import STEP_KEY, StepChoiceField
from workflows.application.definitions import validation_context
from workflows.domain.actions import MAX_ATTEMPTS_LIMIT, MAX_BASE_DELAY
from workflows.domain.errors import WorkflowValidationError
from workflows.domain.templates import custom_field_warning
from workflows.domain.workflow import parse_steps
from workflows.infrastructure.models import WorkflowStep
from workflows.infrastructure.templates import renderer
from workflows.steps import registry

ACCOUNT_TAGS_LIST = "relay-account-tags"  # the builder page's one datalist of the account's tags
STEP_PATH = re.compile(r"steps\[(\d+)\](?:\.(\w+))?(?:\.(.*))?")
_FIRST_KEY = re.compile(r"([^.\[]+)(.*)")


class StepConfigForm(forms.Form):
    """The fields of one action's config. Subclasses say how config and fields map onto each other."""

    action_type: ClassVar[str]
    label: ClassVar[str]  # what the "add a step" palette and the step's header say
    group: ClassVar[str] = "Actions"
    description: ClassVar[str] = ""
    # config key -> the field its errors go to (the first part of an error's path after `config.`)
    keys: ClassVar[dict[str, str]] = {}
    retries: ClassVar[bool] = False  # offer "try up to N times" (actions that reach the outside world)
    previewable: ClassVar[bool] = False  # offer a preview and a test send (its executor module has a PREVIEW)
    test_to_placeholder: ClassVar[str] = ""  # the test send's address field, e.g. you@example.com
    # What its result offers a later condition (CONTRACT `steps.<key><suffix>`): (suffix, words, yes or no).
    # A suffix ending in "." takes a path the marketer types after it (`.body.` -> steps.api.body.plan).
    result_fields: ClassVar[tuple[tuple[str, str, bool], ...]] = ()
    tracks_engagement: ClassVar[bool] = False  # its messages' opens and clicks are events a wait may name it in
    # field -> (other field, value): the field shows only while the other field has that value ("a|b": either)
    show_if: dict[str, tuple[str, str]] = {}  # a form may set its own in setup() (choices known then)
    # a step that decides where the run goes carries its paths in its config: it has no "next step" of its own
    decides: ClassVar[bool] = False
    next_label: ClassVar[str] = "Then go to"  # what the step's own "next" is called on its card

    max_attempts = forms.IntegerField(
        label="If it fails, try up to",
        required=False,
        min_value=1,
        max_value=MAX_ATTEMPTS_LIMIT,
        widget=forms.NumberInput(attrs={"class": "vIntegerField", "min": 1, "max": MAX_ATTEMPTS_LIMIT}),
    )
    base_delay = forms.FloatField(
        label="First retry after (seconds)",
        required=False,
        min_value=0,
        max_value=MAX_BASE_DELAY,
        widget=forms.NumberInput(attrs={"class": "vIntegerField", "min": 0, "step": "any"}),
    )

    def __init__(self, *args: Any, builder: BuilderContext, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.builder = builder
        if self.retries:
            self.fields["max_attempts"].help_text = (
                f"times in all (blank: {builder.default_attempts}). Relay retries only failures that may pass: "
                "timeouts, busy or unreachable servers."
            )
            self.fields[
                "base_delay"
            ].help_text = f"blank: {builder.default_base_delay:g} s; each next retry waits twice as long."
        else:
            del self.fields["max_attempts"]
            del self.fields["base_delay"]
        self.setup()

    def setup(self) -> None:
        """Fill choices and suggestions from the builder context (tags, custom fields...)."""

    # --- config <-> fields ------------------------------------------------------------------
    @classmethod
    def initial_from(cls, config: Mapping[str, Any]) -> dict[str, Any] | None:
        """The fields' initial values for a stored config, or None when these fields cannot show all of it."""
        raise NotImplementedError

    def to_config(self) -> dict[str, Any]:
        """The config the marketer's input means (cleaned_data is valid)."""
        raise NotImplementedError

    @classmethod
    def _split_retries(cls, config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(the action's own keys, the retry fields' initial); None when a key is neither."""
        own = {k: v for k, v in config.items() if k not in ("max_attempts", "base_delay")}
        retry = {k: config[k] for k in ("max_attempts", "base_delay") if k in config}
        if retry and not cls.retries:
            return None
        if any(key not in cls.keys for key in own):
            return None
        return own, retry

    def retry_config(self) -> dict[str, Any]:
        if not self.retries:
            return {}
        data = self.cleaned_data
        config: dict[str, Any] = {}
        if data.get("max_attempts") is not None:
            config["max_attempts"] = data["max_attempts"]
        if data.get("base_delay") is not None:
            delay = data["base_delay"]
            config["base_delay"] = int(delay) if float(delay).is_integer() else delay
        return config

    # --- the domain's errors, next to their field -------------------------------------------
    def field_for(self, rest: str) -> str | None:
        match = _FIRST_KEY.fullmatch(rest)
        if not match:
            return None
        key = match.group(1)
        if key in ("max_attempts", "base_delay") and key in self.fields:
            return key
        field = self.keys.get(key)
        return field if field in self.fields else None

    def place_error(self, rest: str, reason: str) -> None:
        field = self.field_for(rest) if rest else None
        if field is None:
            self.add_error(None, f"{rest}: {reason}" if rest else _sentence(reason))
            return
        match = _FIRST_KEY.fullmatch(rest)
        detail = match.group(2).lstrip(".") if match else ""
        if match and detail.startswith("["):  # a row of a list: "Branch 1, condition 2 (field)"
            message = f"{where_in_list(rest)}: {reason}"
        else:
            message = f"{detail}: {reason}" if detail else reason
        self.add_error(field, _sentence(message))

    def visible_rows(self) -> list[dict[str, Any]]:
        """The template's rows: each bound field with the condition that shows it."""
        rows = []
        for bound in self:
            if bound.is_hidden:
                continue
            condition = self.show_if.get(bound.name)
            rows.append(
                {
                    "field": bound,
                    "show_if": f"{self.add_prefix(condition[0])}={condition[1]}" if condition else "",
                    "is_retry": bound.name in ("max_attempts", "base_delay"),
                }
            )
        return rows


_ROW_WORDS = {"branches": "branch", "paths": "path", "conditions": "condition", "goals": "goal"}
_PART = re.compile(r"(\w+)(?:\[(\d+)\])?")


def where_in_list(path: str) -> str:
    """`branches[0].conditions[1].field` -> "Branch 1, condition 2 (field)": a path in a marketer's words."""
    words, tail = [], ""
    for part in path.split("."):
        match = _PART.fullmatch(part)
        if not match:
            return path
        name, index = match.group(1), match.group(2)
        if index is not None:
            words.append(f"{_ROW_WORDS.get(name, name)} {int(index) + 1}")
        else:
            tail = {"next": "where it leads", "then": "where it leads", "op": "how to compare"}.get(name, name)
    text = ", ".join(words) + (f" ({tail})" if tail else "")
    return _sentence(text)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _strings(item)]
    return []


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


class _StepForms(Mapping[str, type[StepConfigForm]]):
    """The builder's form of each step type, by name: each type's `workflows/steps/<name>/form.py` (`FORM`), in the
    registry's order, loaded when first asked (the forms import this module)."""

    def __getitem__(self, name: str) -> type[StepConfigForm]:
        return cast(type[StepConfigForm], registry.load(name, "form").FORM)  # a KeyError for no step type

    def __iter__(self) -> Iterator[str]:
        return iter(registry.STEP_TYPES)

    def __len__(self) -> int:
        return len(registry.STEP_TYPES)

    def __contains__(self, name: object) -> bool:
        return name in registry.STEP_TYPES


STEP_FORMS: Mapping[str, type[StepConfigForm]] = _StepForms()


def step_forms() -> Mapping[str, type[StepConfigForm]]:
    return STEP_FORMS


def step_palette() -> list[dict[str, Any]]:
    """The "add a step" choices, grouped as the registry's forms say."""
    groups: dict[str, list[dict[str, str]]] = {}
    for action_type, form in STEP_FORMS.items():
        groups.setdefault(form.group, []).append(
            {"action_type": action_type, "label": form.label, "description": form.description}
        )
    return [{"group": group, "items": items} for group, items in groups.items()]


# --- one inline form per step ----------------------------------------------------------------
class StepForm(forms.ModelForm):
    position = forms.IntegerField(required=False, widget=forms.HiddenInput(attrs={"data-position": "1"}))
    name = forms.CharField(
        required=False,
        max_length=200,
        label="Step name",
        widget=forms.TextInput(attrs={"class": "vTextField", "placeholder": "Name this step (optional)"}),
    )
    action_type = forms.ChoiceField(label="Action", widget=forms.Select(attrs={"data-action-type": "1"}))
    key = forms.CharField(
        required=False,
        max_length=64,
        label="Key",
        widget=forms.TextInput(
            attrs={"class": "relay-step-key", "data-step-key": "1", "placeholder": "key", "spellcheck": "false"}
        ),
        help_text="How other steps and the run's history name this step: lowercase letters, digits and _.",
    )
    next_key = StepChoiceField(label="Then go to", blank_label="The next step in order")
    config_mode = forms.ChoiceField(
        choices=[("form", "form"), ("json", "json")],
        initial="form",
        required=False,
        widget=forms.HiddenInput(attrs={"data-config-mode": "1"}),
    )
    config_json = forms.CharField(
        required=False,
        label="Settings as JSON",
        widget=forms.Textarea(attrs={"rows": 8, "class": "relay-json", "data-json-check": "1", "spellcheck": "false"}),
    )

    class Meta:
        model = WorkflowStep
        fields = ("position", "name", "action_type")

    def __init__(self, *args: Any, builder: BuilderContext | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.builder = builder or BuilderContext()
        cast(forms.ChoiceField, self.fields["action_type"]).choices = [("", "— choose an action —")] + [
            (key, form.label) for key, form in STEP_FORMS.items()
        ]
        stored = dict(self.instance.config or {}) if self.instance.pk else {}
        stored_type = self.instance.action_type if self.instance.pk else ""
        initial_by_type: dict[str, dict[str, Any]] = {}
        shown = STEP_FORMS[stored_type].initial_from(stored) if stored_type in STEP_FORMS else None
        if stored_type:
            initial_by_type[stored_type] = shown or {}
            if shown is None:
                self.initial["config_mode"] = "json"
        self.initial.setdefault("config_json", json.dumps(stored, indent=2, ensure_ascii=False) if stored else "{}")
        if self.instance.pk:
            self.initial.setdefault("key", getattr(self.instance, "key", "") or "")
            self.initial.setdefault("next_key", getattr(self.instance, "next_key", "") or "")
        cast(StepChoiceField, self.fields["next_key"]).set_steps(self.builder.steps)
        chosen = self.chosen_type
        self.config_forms: dict[str, StepConfigForm] = {
            key: form_class(
                self.data if self.is_bound and key == chosen else None,  # only the chosen action's is checked
                prefix=self.add_prefix(key),
                initial=initial_by_type.get(key, {}),
                builder=self.builder,
            )
            for key, form_class in STEP_FORMS.items()
        }
        self.warnings: list[str] = []

    # The service renumbers and writes the steps; two steps swapping positions is no conflict.
    def _get_validation_exclusions(self) -> set[str]:
        return {*super()._get_validation_exclusions(), "position", "workflow"}  # type: ignore[misc]  # private, unstubbed

    @property
    def chosen_type(self) -> str:
        if self.is_bound:
            return self.data.get(self.add_prefix("action_type"), "") or ""
        return self.instance.action_type or self.initial.get("action_type", "") or ""

    @property
    def chosen_form(self) -> StepConfigForm | None:
        return self.config_forms.get(self.chosen_type)

    @property
    def in_json_mode(self) -> bool:
        if self.is_bound:
            return self.data.get(self.add_prefix("config_mode")) == "json"
        return self.initial.get("config_mode") == "json"

    def has_changed(self) -> bool:
        form = self.chosen_form
        return super().has_changed() or bool(form is not None and form.has_changed())

    @property
    def chosen_decides(self) -> bool:
        form = self.chosen_form
        return bool(form is not None and form.decides and not self.in_json_mode)

    @property
    def next_label(self) -> str:
        """What the card calls the step's own "next" (a step that decides has none: its paths say)."""
        form = self.chosen_form
        return form.next_label if form is not None else StepConfigForm.next_label

    def clean_key(self) -> str:
        key = (self.cleaned_data.get("key") or "").strip()
        if key and not STEP_KEY.fullmatch(key):
            raise ValidationError("A key is 1 to 64 lowercase letters, digits and _, e.g. welcome_email.")
        return key

    def step(self) -> dict[str, Any]:
        """The step as the CONTRACT reads it: key (when given), name, action, config, next (when chosen)."""
        data = self.cleaned_data
        step: dict[str, Any] = {"name": data.get("name") or "", "action_type": data["action_type"]}
        if data.get("key"):
            step["key"] = data["key"]
        step["config"] = data.get("config") or {}
        form = self.config_forms.get(data["action_type"])
        if data.get("next_key") and not (form is not None and form.decides and not self.in_json_mode):
            step["next"] = data["next_key"]
        return step

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())  # a form's clean() returns its cleaned_data
        action_type = data.get("action_type")
        if not action_type or data.get("DELETE"):
            return data
        if self.in_json_mode:
            text = (data.get("config_json") or "").strip() or "{}"
            try:
                config = json.loads(text)
            except ValueError as exc:
                self.add_error("config_json", f"This is not valid JSON: {exc}.")
                return data
            data["config"] = config
            return data
        config_form = self.config_forms[action_type]
        if not config_form.is_valid():
            self.add_error(None, "Some settings of this step need a look: see below.")
            return data
        data["config"] = config_form.to_config()
        return data

    def place_error(self, rest: str, reason: str) -> None:
        """An error the domain found at `steps[i].config.<rest>`."""
        if self.in_json_mode:
            self.add_error("config_json", f"{rest}: {reason}" if rest else reason)
            return
        config_form = self.chosen_form
        if config_form is None:
            self.add_error(None, reason)
            return
        config_form.place_error(rest, reason)
        if None not in self.errors:
            self.add_error(None, "Some settings of this step need a look: see below.")

    def custom_field_warnings(self) -> list[str]:
        """Custom fields the step's templates name that no contact of the account has yet (not errors)."""
        config = self.current_config()
        if not config or self.builder.account_id is None:
            return []
        in_use = frozenset(self.builder.custom_fields)
        warnings = []
        for text in _strings(config):
            for path in renderer.variables(text):
                warning = custom_field_warning(path, in_use)
                if warning and warning not in warnings:
                    warnings.append(_sentence(warning))
        return warnings

    def current_config(self) -> dict[str, Any]:
        if self.is_bound and hasattr(self, "cleaned_data"):
            return dict(self.cleaned_data.get("config") or {})
        return dict(self.instance.config or {}) if self.instance.pk else {}


class StepFormSet(BaseInlineFormSet):
    """Checks the steps together, as they will run, and puts every error on the step and field it names."""

    # Not Django's `ordered_forms` property (can_order is off here): the steps' forms in the order they will run.
    def ordered_forms(self) -> list[StepForm]:  # type: ignore[override]
        kept = [
            cast(StepForm, form)  # the formset's forms are StepForms (WorkflowStepInline.form)
            for form in self.forms
            if getattr(form, "cleaned_data", None)
            and not form.cleaned_data.get("DELETE")
            and form.cleaned_data.get("action_type")
        ]
        return sorted(kept, key=lambda f: (f.cleaned_data.get("position") is None, f.cleaned_data.get("position") or 0))

    def steps(self) -> list[dict[str, Any]]:
        return [form.step() for form in self.ordered_forms()]

    def clean(self) -> None:
        super().clean()
        # A step whose own fields failed stands in as an "end" step under its key, so the other steps are
        # still checked (one bad step never hides another's errors) and their paths to it still resolve;
        # what the graph says about reaching or ending waits until every step reads.
        ordered = self.ordered_forms()
        checked = [not form.errors and "config" in form.cleaned_data for form in ordered]
        steps = [form.step() if ok else _stand_in(form) for form, ok in zip(ordered, checked, strict=True)]
        try:
            parse_steps(steps, validation_context())
        except WorkflowValidationError as exc:
            for error in exc.errors:
                match = STEP_PATH.fullmatch(error.path)
                if not match or int(match.group(1)) >= len(ordered):
                    raise ValidationError(_sentence(str(error))) from None
                index = int(match.group(1))
                form = ordered[index]
                part, rest = match.group(2), match.group(3) or ""
                if not checked[index] or (not all(checked) and part is None):
                    continue  # a stand-in's, or the graph judged without a step that does not read yet
                if part == "config":
                    form.place_error(rest, error.reason)
                elif part in ("name", "action_type", "key"):
                    form.add_error(part, _sentence(error.reason))
                elif part == "next":
                    form.add_error("next_key", _sentence(error.reason))
                else:
                    form.add_error(None, _graph_words(error.reason) if part is None else _sentence(str(error)))


def _stand_in(form: StepForm) -> dict[str, Any]:
    key = (getattr(form, "cleaned_data", None) or {}).get("key")
    return {"action_type": "end", "config": {}, **({"key": key} if key else {})}


_GRAPH_WORDS = [
    (
        re.compile(r"step '[^']*' is unreachable.*"),
        "No step leads here: contacts never reach this step. Point "
        "another step's “then go to”, a branch or a path at it, or remove it.",
    ),
    (
        re.compile(r"step '[^']*' never ends.*"),
        "Contacts who reach this step never get out: every way on from it "
        "loops back. Let one of its paths go on to a step that ends, or to “End the run”.",
    ),
    (
        re.compile(r"step '[^']*' is in a loop that never waits.*"),
        "This step is in a loop with no wait in it: add a “Wait” or “Wait for something to happen” step to the loop.",
    ),
]


def _graph_words(reason: str) -> str:
    """What the graph's checks say about a whole step, in a marketer's words."""
    for pattern, words in _GRAPH_WORDS:
        if pattern.fullmatch(reason):
            return words
    return _sentence(reason)
