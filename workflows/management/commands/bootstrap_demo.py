"""Create (once) a demo account, a superuser who owns it, and a few contacts; print how to log in.

Idempotent: `make run` calls it every time. The password is generated on
first creation and kept in `.demo-credentials` (git-ignored), never in the
repository.
"""

import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.models import Account, Membership
from contacts.application.services import contact_create
from contacts.models import Contact
from workflows.application.workflows import WorkflowService
from workflows.models import Workflow

CREDENTIALS = Path(settings.BASE_DIR) / ".demo-credentials"


class Command(BaseCommand):
    help = "Create the demo account and superuser for a first run, and print how to log in."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")

    @transaction.atomic
    def handle(self, *args, username: str, **options) -> None:
        account, _ = Account.objects.get_or_create(slug="demo", defaults={"name": "Demo"})
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None or not CREDENTIALS.exists():
            password = secrets.token_urlsafe(12)
            if user is None:
                user = User.objects.create_superuser(username, f"{username}@example.com", password)
            else:
                user.set_password(password)
                user.save(update_fields=["password"])
            CREDENTIALS.write_text(f"{username}\n{password}\n")
            CREDENTIALS.chmod(0o600)
        Membership.objects.get_or_create(account=account, user=user, defaults={"role": "owner"})
        if not Workflow.objects.filter(account=account).exists():
            self._demo_workflow(account.pk)  # first, so tagging Grace below starts its first run
        if not Contact.objects.filter(account=account).exists():
            for first, email, tags in [
                ("Ada", "ada@example.com", ["customer"]),
                ("Grace", "grace@example.com", ["trial"]),
            ]:
                contact_create(account_id=account.pk, first_name=first, email=email, tags=tags, phone="")
        _, password = CREDENTIALS.read_text().split()[:2]
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo account '{account.name}' is ready. Log in at http://127.0.0.1:8000/admin/ "
                f"as {username} / {password} (kept in {CREDENTIALS.name})."
            )
        )

    @staticmethod
    def _demo_workflow(account_id: int) -> None:
        """'Nurture trials': tag a contact `trial` and watch the worker carry the run (console email)."""
        service = WorkflowService()
        workflow = service.create(
            account_id=account_id,
            name="Nurture trials",
            description="When a contact is tagged trial: email them, wait a moment, tag them nurtured.",
            trigger={"type": "event", "event": "tag.added", "tag": "trial"},
            reenrollment="after_finish",
            steps=[
                {
                    "name": "Welcome email",
                    "action_type": "send_email",
                    "config": {"subject": "Welcome, {{ contact.first_name }}", "text": "Your trial has started."},
                },
                {"name": "Wait", "action_type": "wait", "config": {"duration": "10s"}},
                {"name": "Mark nurtured", "action_type": "add_tag", "config": {"tag": "nurtured"}},
            ],
        )
        service.publish(workflow_id=workflow.pk)
