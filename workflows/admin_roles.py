"""What each role may do in the admin, as Django permissions: one table, for every app's admin.

Membership says *for which accounts* (accounts.admin_scoping); these groups say *what*. `manage.py
sync_admin_roles` and every `migrate` create or update the groups "Relay marketer", "Relay viewer" and
"Relay operator"; give a staff user the group of their role. It names every app's permissions, so it lives
in workflows, the app at the top that depends on all the others (config, the composition root, is imported by no app).
"""

from __future__ import annotations

VIEW = [
    "accounts.view_account",
    "contacts.view_contact",
    "contacts.view_consentchange",
    "workflows.view_workflow",
    "workflows.view_workflowstep",
    "workflows.view_workflowversion",
    "workflows.view_workflowexecution",
    "workflows.view_executionlog",
    "integrations.view_outboundmessage",  # the ledger of messages sent (read-only for everyone)
    "integrations.view_sendingsettings",  # the account's send windows and frequency caps
]
ADMIN_ROLE_PERMISSIONS: dict[str, list[str]] = {
    # Sees, changes and exports nothing.
    "viewer": VIEW,
    # Builds and publishes workflows, starts and steers runs, manages contacts (tags, import, export).
    "marketer": [
        *VIEW,
        "workflows.add_workflow",
        "workflows.change_workflow",
        "workflows.add_workflowstep",
        "workflows.change_workflowstep",
        "workflows.delete_workflowstep",
        "workflows.add_workflowexecution",  # start a run
        "workflows.change_workflowexecution",  # pause, resume, cancel, retry runs
        "contacts.add_contact",
        "contacts.change_contact",
        "contacts.delete_contact",
        "contacts.export_contact",  # audited (accounts.application.audit)
        # The account's send windows and frequency caps (integrations.admin): who builds messages sets them.
        "integrations.add_sendingsettings",
        "integrations.change_sendingsettings",
    ],
    # The operators' pages: the dashboard and the queue (staff, and the jobs permission).
    "operator": [*VIEW, "jobs.view_job", "jobs.change_job"],
}
GROUP_NAMES = {role: f"Relay {role}" for role in ADMIN_ROLE_PERMISSIONS}


def sync_admin_roles() -> dict[str, int]:
    """Create or update the role groups; returns how many permissions each holds."""
    from django.contrib.auth.models import Group, Permission

    counts = {}
    for role, names in ADMIN_ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=GROUP_NAMES[role])
        permissions = []
        for name in names:
            app_label, codename = name.split(".")
            permissions.append(Permission.objects.get(content_type__app_label=app_label, codename=codename))
        group.permissions.set(permissions)
        counts[role] = len(permissions)
    return counts


def sync_admin_roles_after_migrate(sender: object, using: str = "default", **kwargs: object) -> None:
    """Keep the groups in step with the table on every `migrate`, once, after the last app's permissions exist.

    A release that adds a permission to a role (contacts.export_contact) reaches an existing install without
    anyone remembering to run `sync_admin_roles`; a group an operator made by hand is left alone.
    """
    from django.apps import apps
    from django.db import DEFAULT_DB_ALIAS

    if using != DEFAULT_DB_ALIAS or sender is not list(apps.get_app_configs())[-1]:
        return
    sync_admin_roles()


def grant_role(user, role: str) -> None:
    """Put a staff user in the group of `role` (creating the groups if needed)."""
    from django.contrib.auth.models import Group

    sync_admin_roles()
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    user.groups.add(Group.objects.get(name=GROUP_NAMES[role]))
