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
