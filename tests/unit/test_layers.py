"""The layering rules of DDD_NOTES ("Layers"), read from the source: dependencies point inward, and nothing
wires itself at import time. A file that breaks one is named with the line that does."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("accounts", "contacts", "jobs", "workflows", "integrations", "idempotency")
# The lists other apps' admins extend (docs/subsystems/admin.md, "Extension points between apps' admins").
ADMIN_EXTENSION_POINTS = frozenset({"contact_page_panels", "import_follow_ups", "job_links"})


def _modules(folder: str) -> list[Path]:
    return sorted(path for app in APPS for path in (ROOT / app).glob(f"{folder}/**/*.py"))


def _imports(tree: ast.Module) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, node.module), *((node.lineno, f"{node.module}.{a.name}") for a in node.names)]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def test_infrastructure_imports_no_application_code():
    offending = [
        f"{_where(path, line)} imports {name}"
        for path in _modules("infrastructure")
        for line, name in _imports(ast.parse(path.read_text()))
        if ".application" in f".{name}" and name.split(".")[0] in APPS
    ]
    assert offending == []


def test_the_domain_imports_no_django_and_no_outer_layer():
    offending = [
        f"{_where(path, line)} imports {name}"
        for path in _modules("domain")
        for line, name in _imports(ast.parse(path.read_text()))
        if name.split(".")[0] in ("django", "rest_framework")
        or any(f".{layer}" in f".{name}" for layer in ("application", "infrastructure", "api"))
    ]
    assert offending == []


def _registrations_at_import(path: Path) -> list[str]:
    """Module-level statements that add to an extension point (`job_links.append(...)`, `x += [...]`)."""
    found = []
    for node in ast.parse(path.read_text()).body:
        target = None
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                target = func.value.id
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            target = node.target.id
        if target in ADMIN_EXTENSION_POINTS:
            found.append(f"{_where(path, node.lineno)} extends {target}")
    return found


def test_no_admin_module_registers_with_another_apps_admin_when_imported():
    admin_modules = sorted(path for app in APPS for path in (ROOT / app).glob("admin*.py"))
    assert admin_modules, "the admin modules were not found"
    assert [found for path in admin_modules for found in _registrations_at_import(path)] == []
