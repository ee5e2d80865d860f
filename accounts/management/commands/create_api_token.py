"""Issue an API token and print it once.

The secret goes alone to standard output, so `TOKEN=$(manage.py create_api_token ada)`
works; what it is for goes to standard error.
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.application.tokens import api_token_create, token_account_for
from accounts.domain.errors import AccountError


class Command(BaseCommand):
    help = "Create an API token for USERNAME acting for an account, and print it once."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--account",
            metavar="SLUG",
            help="The account the token acts for. Default: the user's only account "
            "(a superuser with no account gets an operator token).",
        )
        parser.add_argument("--name", default="", help="What the token is for, e.g. 'crm-sync'.")

    def handle(self, *args, username: str, account: str | None, name: str, **options) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        try:
            account_id = token_account_for(user_id=user.pk, account_slug=account)
            token, secret = api_token_create(user_id=user.pk, account_id=account_id, name=name)
        except AccountError as exc:
            raise CommandError(str(exc)) from None
        acting_for = f"account '{token.account.slug}'" if token.account else "no account (operator endpoints only)"
        self.stderr.write(
            f"Token {token.prefix}… (id {token.pk}) for {username}, acting for {acting_for}. "
            "It is shown once: store it now."
        )
        self.stdout.write(secret)
