"""Write the contact through the contacts service (its events fire, so other workflows chain), inside the
transaction that records the step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django.core.exceptions import ValidationError
from django.db import IntegrityError

from contacts.application.services import contact_update
from contacts.domain.model import ContactError
from kernel.failures import ValidationFailure
from workflows.application.actions import ActionResult, StepRun
from workflows.domain.templates import render_tree
from workflows.steps.update_contact.config import UpdateContactConfig


class UpdateContact:
    action_type = "update_contact"
    external = False

    def execute(self, run: StepRun) -> ActionResult:
        config = cast(UpdateContactConfig, run.step.config)
        fields: dict[str, Any] = {name: run.text(value, f"fields.{name}").strip() for name, value in config.fields}
        if config.custom_fields:
            fields["custom_fields"] = {
                key: render_tree(value, _custom_field_text(run, key)) for key, value in config.custom_fields
            }
        try:
            contact = contact_update(contact_id=run.contact_id, fields=fields, locked_row=run.locked_contact_row)
        except ContactError as exc:
            raise ValidationFailure(f"{exc.field}: {exc.reason}") from None
        except ValidationError as exc:
            problems = "; ".join(f"{name}: {' '.join(messages)}" for name, messages in exc.message_dict.items())
            raise ValidationFailure(problems) from None
        except IntegrityError:
            raise ValidationFailure("email: another contact of this account already has this address") from None
        return ActionResult({"updated": sorted(fields), "contact_id": contact.pk})


def _custom_field_text(run: StepRun, key: str) -> Callable[[str], str]:
    return lambda text: run.text(text, f"custom_fields.{key}")


EXECUTOR = UpdateContact()
