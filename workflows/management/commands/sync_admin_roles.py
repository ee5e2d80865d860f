"""Create or update the admin's role groups (workflows/admin_roles.py): Relay marketer, viewer, operator.

In workflows, the app at the top (as bootstrap_demo): the table names every app's permissions, so accounts, which
depends on no other app, cannot hold it.
"""

from django.core.management.base import BaseCommand

from workflows.admin_roles import GROUP_NAMES, sync_admin_roles


class Command(BaseCommand):
    help = "Create or update the groups that give staff users a role's permissions in the admin."

    def handle(self, *args, **options) -> None:
        for role, count in sync_admin_roles().items():
            self.stdout.write(f"{GROUP_NAMES[role]}: {count} permissions")
