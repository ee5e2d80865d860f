"""The layering rules of DDD_NOTES ("Layers"), read from the source: dependencies point inward, and nothing
wires itself at import time. A file that breaks one is named with the line that does."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("accounts", "contacts", "jobs", "workflows", "integrations", "idempotency")


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
