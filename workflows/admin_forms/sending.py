"""A send step's own send window, frequency caps and purpose, on its card in the builder (issue 23 section 5).

The fields are integrations' (`integrations.admin_forms.layer_fields`), under the prefix `sending_`; the step's
config gets the keys the sending rules read (`purpose`, `send_window`, `frequency_caps`, `when_capped`) only when
the marketer sets them, so a step that says nothing keeps the workflow's and the account's. A window's details
and the cap rows show only where they apply (the builder's `show_if`). The rules' own parser checks them in the
form's clean, each problem on its field, before the steps are checked together.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from integrations.admin_forms import (
    CAP_ROWS,
    CAPS_THESE,
    CUSTOM,
    PRESETS,
    declare_fields,
    layer_document,
    layer_fields,
    layer_initial,
    layer_problems,
)
from integrations.domain.sending.settings import STEP_KEYS
from workflows.admin_forms.steps import StepConfigForm

PREFIX = "sending_"
STEP_CAP_ROWS = 3  # a step's own caps: a few rows are plenty on a card


def with_sending_overrides(form_class: type[StepConfigForm]) -> type[StepConfigForm]:
    """Give a send step's form the overrides of the sending rules for its message."""
    fields = layer_fields(PREFIX, channels=False, under="the workflow", cap_rows=STEP_CAP_ROWS)
    fields[f"{PREFIX}purpose"].label = "This message is"
    declare_fields(form_class, fields)
    window = f"{PREFIX}all_window"
    shown = "|".join([*PRESETS, CUSTOM])
    show_if = {f"{PREFIX}all_{part}": (window, CUSTOM) for part in ("days", "hours")}
    show_if |= {f"{PREFIX}all_{part}": (window, shown) for part in ("holidays", "fr_holidays", "spread")}
    for i in range(STEP_CAP_ROWS):
        for part in ("max", "every", "unit", "channel", "transactional"):
            show_if[f"{PREFIX}cap{i}_{part}"] = (f"{PREFIX}caps", CAPS_THESE)
    form_class.show_if = {**form_class.show_if, **show_if}
    form_class.keys = {
        **form_class.keys,
        "purpose": f"{PREFIX}purpose",
        "send_window": window,
        "frequency_caps": f"{PREFIX}caps",
        "when_capped": f"{PREFIX}when_capped",
    }
    own_initial = form_class.initial_from.__func__  # type: ignore[attr-defined]
    own_config = form_class.to_config
    own_clean = form_class.clean

    def initial_from(cls: type[StepConfigForm], config: Mapping[str, Any]) -> dict[str, Any] | None:
        sending = {key: config[key] for key in STEP_KEYS if key in config}
        if not _shown_whole(sending):
            return None  # "Advanced: edit as JSON" shows it, nothing is lost
        initial = own_initial(cls, {key: value for key, value in config.items() if key not in STEP_KEYS})
        if initial is None:
            return None
        return {**initial, **layer_initial(sending, PREFIX, channels=False)}

    def clean(self: StepConfigForm) -> dict[str, Any] | None:
        data = own_clean(self)
        cleaned = data if data is not None else self.cleaned_data
        self.sending_document = layer_document(self, cleaned, PREFIX, channels=False)  # type: ignore[attr-defined]
        layer_problems(self, self.sending_document, PREFIX, channels=False)  # type: ignore[attr-defined]
        return data

    def to_config(self: StepConfigForm) -> dict[str, Any]:
        return {**own_config(self), **getattr(self, "sending_document", {})}

    form_class.initial_from = classmethod(initial_from)  # type: ignore[method-assign, assignment]
    form_class.clean = clean  # type: ignore[method-assign, assignment]
    form_class.to_config = to_config  # type: ignore[method-assign]
    return form_class


def _shown_whole(sending: Mapping[str, Any]) -> bool:
    """Whether the fields can show these keys as they are (a spread in whole minutes, caps that fit the rows)."""
    window = sending.get("send_window")
    if isinstance(window, Mapping) and isinstance(window.get("spread"), int) and window["spread"] % 60:
        return False
    caps = sending.get("frequency_caps")
    return not (isinstance(caps, list) and len(caps) > min(STEP_CAP_ROWS, CAP_ROWS))
