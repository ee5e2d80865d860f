"""The handler API as users import it: every import line the docs show works, `jobs.public` holds the whole
handler API, and `jobs.domain.errors` (where the failure classes lived) is an alias of the same classes."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import jobs.public
import kernel.failures

ROOT = Path(__file__).resolve().parents[3]
DOCS = ("README.md", "DDD_NOTES.md")
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)

# The public names jobs.domain.errors had before the move to kernel.failures (git show 02dda94^).
OLD_ERRORS_NAMES = [
    "MAX_ERROR_LENGTH",
    "RETRYABLE_CATEGORIES",
    "ErrorCategory",
    "JobError",
    "RetryableError",
    "PermanentError",
    "TimeoutFailure",
    "NetworkFailure",
    "ServerFailure",
    "RateLimited",
    "ValidationFailure",
    "AuthFailure",
    "JobTimeout",
    "ClassifiedError",
    "classify",
    "redact_urls",
    "storable_text",
    "is_database_error",
    "format_error",
    "truncate",
    "LeaseLost",
]


def _documented_imports() -> list[tuple[str, int, ast.Import | ast.ImportFrom]]:
    """Every import statement in the docs' ```python blocks, with where it is written."""
    found = []
    for name in DOCS:
        text = (ROOT / name).read_text()
        for block in _BLOCK.finditer(text):
            first_line = text[: block.start()].count("\n") + 2
            tree = ast.parse(block.group(1), filename=f"{name} block at line {first_line}")
            found += [
                (name, first_line + node.lineno - 1, node)
                for node in ast.walk(tree)
                if isinstance(node, ast.Import | ast.ImportFrom)
            ]
    return found


DOCUMENTED = _documented_imports()


def test_the_docs_show_the_handler_api_imported_from_jobs_public():
    modules = {node.module for _, _, node in DOCUMENTED if isinstance(node, ast.ImportFrom)}
    assert "jobs.public" in modules
    assert {"jobs.application.queue", "jobs.application.registry", "kernel.failures"}.isdisjoint(modules)


@pytest.mark.parametrize(("doc", "line", "statement"), DOCUMENTED, ids=lambda v: str(v) if isinstance(v, int) else "")
def test_every_documented_import_works(doc, line, statement):
    code = ast.unparse(statement)
    namespace: dict[str, object] = {}
    exec(compile(code, f"{doc}:{line}", "exec"), namespace)  # noqa: S102 - the docs' own import lines
    bound = [alias.asname or alias.name.split(".")[0] for alias in statement.names]
    assert all(name in namespace for name in bound), f"{doc}:{line}: {code}"


def test_jobs_public_holds_the_handler_api():
    for name in jobs.public.__all__:
        assert getattr(jobs.public, name) is not None, name
    assert {"enqueue", "job_handler", "JobContext", "PermanentError", "RetryableError", "RateLimited"} <= set(
        jobs.public.__all__
    )
    for name in ("PermanentError", "RetryableError", "RateLimited", "JobError"):
        assert getattr(jobs.public, name) is getattr(kernel.failures, name)


@pytest.mark.parametrize("name", OLD_ERRORS_NAMES)
def test_jobs_domain_errors_is_an_alias_of_the_same_objects(name):
    old = importlib.import_module("jobs.domain.errors")
    assert getattr(old, name) is getattr(kernel.failures, name)
    assert name in old.__all__


def test_an_old_style_handler_error_is_classified_as_before():
    from jobs.domain.errors import PermanentError, RateLimited, RetryableError, classify

    assert classify(PermanentError("bad")).retryable is False
    assert classify(RetryableError("later")).retryable is True
    assert classify(RateLimited(retry_after=7)).retry_after == 7


@pytest.mark.parametrize("module", ["handlers", "schedules", "operations", "metrics", "storage", "admin", "api"])
def test_every_name_a_public_submodule_publishes_is_there(module):
    published = importlib.import_module(f"jobs.public.{module}")
    assert published.__all__, module
    assert [name for name in published.__all__ if getattr(published, name, None) is None] == []
