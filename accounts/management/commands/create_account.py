"""Create an account with its owner.

The owner must exist unless --create-owner is given, which makes an API-only
user (no password: it cannot log in to the admin, only use API tokens).
Creating people's logins on the side would hide typos in a username.
"""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from accounts.application.accounts import account_create
from accounts.domain.errors import AccountError


class Command(BaseCommand):
    help = "Create an account named NAME with USERNAME as its owner, and print its slug."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name")
        parser.add_argument("--owner", required=True, metavar="USERNAME")
        parser.add_argument("--slug", help="Default: made from the name, unique (acme, acme-2...).")
        parser.add_argument(
            "--create-owner",
            action="store_true",
            help="Create the owner if missing, as an API-only user without a password.",
        )

    @transaction.atomic
    def handle(self, *args, name: str, owner: str, slug: str | None, create_owner: bool, **options) -> None:
        User = get_user_model()
        user = User.objects.filter(username=owner).first()
        if user is None:
            if not create_owner:
                raise CommandError(
                    f"No user named {owner!r}. Create it first (manage.py createsuperuser, or the admin), "
                    "or pass --create-owner for an API-only user."
                )
            try:
                User.username_validator(owner)
            except ValidationError as exc:
                raise CommandError(f"Bad username {owner!r}: {' '.join(exc.messages)}") from None
            user = User.objects.create_user(username=owner)  # no password: unusable, API tokens only
        try:
            account = account_create(name=name, owner_id=user.pk, slug=slug)
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(f"Account '{account.name}' created with {owner} as owner.")
        self.stdout.write(account.slug)
