"""Revoke an API token by its prefix (as shown when it was created and in the admin) or its id."""

from django.core.management.base import BaseCommand, CommandError

from accounts.application.tokens import api_token_revoke
from accounts.models import ApiToken


class Command(BaseCommand):
    help = "Revoke an API token, given its prefix (rly_XXXXXXXX) or its id."

    def add_arguments(self, parser) -> None:
        parser.add_argument("token", help="The token's prefix or id.")

    def handle(self, *args, token: str, **options) -> None:
        is_id = token.isascii() and token.isdigit() and len(token) <= 18
        query = ApiToken.objects.filter(pk=int(token)) if is_id else ApiToken.objects.filter(prefix=token)
        matches = list(query[:2])
        if not matches:
            raise CommandError(f"No token {token!r}.")
        if len(matches) > 1:
            raise CommandError(f"Several tokens have prefix {token!r}; revoke by id.")
        revoked = api_token_revoke(token_id=matches[0].pk)
        self.stdout.write(
            f"Token {revoked.prefix}… (id {revoked.pk}) revoked at {revoked.revoked_at:%Y-%m-%d %H:%M:%S}."
        )
