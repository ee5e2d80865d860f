"""Roles and what each may do inside its account.

One table, so a reader finds every permission rule here. A Django superuser
is the superadmin: above every account, and the only one reaching the
operator endpoints.
"""

from enum import StrEnum


class Role(StrEnum):
    OWNER = "owner"
    ADMIN = "admin"
    MARKETER = "marketer"
    VIEWER = "viewer"


class Permission(StrEnum):
    VIEW = "view"  # read contacts, workflows, runs
    MANAGE_CONTACTS = "manage_contacts"
    # Download the account's contacts as a file: every contact's data at once, leaving Relay (and its roles)
    # behind. Not a viewer's: an export is a data leak path, so it is audited (accounts.application.audit).
    EXPORT_CONTACTS = "export_contacts"
    MANAGE_WORKFLOWS = "manage_workflows"
    RUN_WORKFLOWS = "run_workflows"  # start, pause, resume, cancel, retry runs; send events
    VIEW_JOBS = "view_jobs"  # the account's own jobs on the queue
    MANAGE_ACCOUNT = "manage_account"  # members, tokens, limits


_ALL = frozenset(Permission)

ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    Role.OWNER: _ALL,
    Role.ADMIN: _ALL,
    Role.MARKETER: frozenset(
        {
            Permission.VIEW,
            Permission.MANAGE_CONTACTS,
            Permission.EXPORT_CONTACTS,
            Permission.MANAGE_WORKFLOWS,
            Permission.RUN_WORKFLOWS,
        }
    ),
    Role.VIEWER: frozenset({Permission.VIEW}),
}


def role_allows(role: Role | str, permission: Permission | str) -> bool:
    """True when `role` holds `permission`; unknown roles hold nothing."""
    try:
        return Permission(permission) in ROLE_PERMISSIONS[Role(role)]
    except ValueError:
        return False
