"""Show (creating if needed) or rotate an account's webhook signing secret, for handing to a receiver."""

from django.core.management.base import BaseCommand, CommandError

from accounts.models import Account
from integrations.application.secrets import webhook_secret_get_or_create, webhook_secret_rotate


class Command(BaseCommand):
    help = "Print an account's webhook signing secret (whsec_...); --rotate issues a new one first."

    def add_arguments(self, parser) -> None:
        parser.add_argument("account", help="the account's slug")
        parser.add_argument(
            "--rotate", action="store_true", help="issue a new secret; the old one signs too for a while"
        )

    def handle(self, *args, account: str, rotate: bool, **options) -> None:
        found = Account.objects.filter(slug=account).first()
        if found is None:
            raise CommandError(f"account: no account with slug {account!r}")
        record = (
            webhook_secret_rotate(account_id=found.pk) if rotate else webhook_secret_get_or_create(account_id=found.pk)
        )
        self.stdout.write(record.secret)
