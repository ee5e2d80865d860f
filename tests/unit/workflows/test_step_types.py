"""A step type lives in one folder (docs/howto/add-a-step-type.md): every registered type provides every part, every
folder is registered, each part keeps to its layer, and no code outside workflows/steps/ names a type to decide
what to do. Read from the registry and the source; no database."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from workflows.admin_forms.steps import STEP_FORMS, StepConfigForm
from workflows.admin_forms.summary import StepSentences, step_lines
from workflows.domain.step_types import StepConfigType, config_type
from workflows.domain.validation import Reader, ValidationContext
from workflows.steps import registry

ROOT = Path(__file__).resolve().parents[3]
STEPS = ROOT / "workflows" / "steps"
TYPES = registry.STEP_TYPES
CONTEXT = ValidationContext(check_template=lambda _source: None, contact_fields=frozenset({"first_name"}))

# Where a type's name may appear outside its folder, and why: none of these chooses what to do by the name.
ALLOWED: dict[tuple[str, str], str] = {
    ("workflows/management/commands/bootstrap_demo.py", "send_email"): "the demo workflow's data",
    ("workflows/management/commands/bootstrap_demo.py", "wait"): "the demo workflow's data",
    ("workflows/management/commands/bootstrap_demo.py", "add_tag"): "the demo workflow's data",
    # A step whose own fields do not read stands in as an end step, so the others' paths to it still resolve.
    ("workflows/admin_forms/steps.py", "end"): "the stand-in of a step that does not read",
    ("workflows/admin_forms/steps.py", "branch"): "the English word for a row of `branches` in an error",
}


def test_the_registry_lists_each_type_once_and_each_has_its_folder():
    assert len(TYPES) == len(set(TYPES))
    folders = sorted(p.name for p in STEPS.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert folders == sorted(TYPES), "a folder under workflows/steps/ that the registry does not list, or the reverse"
    for name in TYPES:
        assert re.fullmatch(r"[a-z][a-z0-9_]{0,31}", name), name  # WorkflowStep.action_type holds 32
        for part in registry.PARTS:
            assert (STEPS / name / f"{part}.py").exists(), f"workflows/steps/{name}/{part}.py is missing"


@pytest.mark.parametrize("name", TYPES)
def test_every_type_provides_every_part(name):
    config = config_type(name)
    assert isinstance(config, StepConfigType)
    assert config.name == name
    assert all(isinstance(key, str) for key in config.keys)
    assert (config.shown is None) == (config.restore is None), "what a response hides, a round trip restores"
    reader = Reader({}, "steps[0].config", CONTEXT)
    config.parse(reader)  # an empty config parses (with errors, for most) and never raises
    assert all(error.path.startswith("steps[0].config") for error in reader.errors)

    executor = registry.load(name, "executor").EXECUTOR
    assert executor.action_type == name
    assert isinstance(executor.external, bool)
    assert callable(executor.execute)

    form = STEP_FORMS[name]
    assert issubclass(form, StepConfigForm)
    assert form.action_type == name
    assert form.label
    assert form.group
    assert form.previewable == hasattr(registry.load(name, "executor"), "PREVIEW"), "a preview needs a previewer"
    assert set(form.keys) <= set(config.keys), "a form's keys are keys its config takes"

    sentences = registry.load(name, "sentences").SENTENCES
    assert isinstance(sentences, StepSentences)
    assert isinstance(step_lines(name, {}), list)  # an empty config says something, never raises


def test_every_registered_part_is_what_the_layers_look_up():
    assert list(STEP_FORMS) == list(TYPES)
    assert [config_type(name).name for name in TYPES] == list(TYPES)


# --- the layers inside a type's folder -------------------------------------------------------------------------
def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, node.module), *((node.lineno, f"{node.module}.{a.name}") for a in node.names)]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def _offending(part: str, refused: tuple[str, ...]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted(STEPS.glob(f"*/{part}.py"))
        for line, name in _imports(path)
        if (name.split(".")[0] in ("django", "rest_framework") and part == "config")
        or any(f".{layer}" in f".{name}" for layer in refused)
    ]


def test_a_config_is_pure_domain():
    """config.py is the domain's: no Django, no application, infrastructure, API or admin, no other part."""
    refused = ("application", "infrastructure", "api", "admin", "admin_forms", "executor", "form", "sentences")
    assert _offending("config", refused) == []


def test_an_executor_is_application_code():
    """executor.py runs the step: it may use the domain and the app's infrastructure, never the admin or the API."""
    assert _offending("executor", ("api", "admin", "admin_forms", "form", "sentences", "schema")) == []


def test_forms_and_sentences_are_the_admins():
    """form.py and sentences.py are the admin's ring: they reach the engine through the domain, never run a step."""
    assert _offending("form", ("executor", "infrastructure", "api")) == []
    assert _offending("sentences", ("executor", "infrastructure", "api")) == []


# --- no type is switched on outside its folder -----------------------------------------------------------------
def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _named_types(path: Path) -> list[tuple[int, str]]:
    """Every string in the code that is exactly a step type's name (docstrings aside)."""
    tree = ast.parse(path.read_text())
    docstrings = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in TYPES and id(node) not in docstrings
    ]


def test_no_code_outside_a_types_folder_names_a_type():
    """The engine, validation, builder, timeline, diff and stats ask the registry: a type's name in their code would
    be a switch a new type must be added to. Comments and docstrings may name types; migrations keep history."""
    found = []
    for path in sorted((ROOT / "workflows").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(("workflows/steps/", "workflows/migrations/")):
            continue
        found += [
            f"{relative}:{line} names {name!r}" for line, name in _named_types(path) if (relative, name) not in ALLOWED
        ]
    assert found == []


def test_no_script_or_template_outside_a_types_folder_names_a_type():
    """The builder's script and the admin's templates take per-type data from the server (stepKinds, the preview's
    shape, the form's attributes), never a list of names."""
    quoted = re.compile(r"""["']({})["']""".format("|".join(map(re.escape, TYPES))))
    found = [
        f"{path.relative_to(ROOT)}:{number} {match.group(0)}"
        for folder in ("static", "templates")
        for path in sorted((ROOT / "workflows" / folder).rglob("*"))
        if path.suffix in (".js", ".html", ".css")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        for match in quoted.finditer(line)
    ]
    assert found == []


def test_the_allowed_exceptions_are_still_needed():
    """The list above only shrinks: an entry whose name is gone from its file is removed."""
    stale = [
        f"{relative} no longer names {name!r}"
        for (relative, name) in ALLOWED
        if name not in {found for _, found in _named_types(ROOT / relative)}
    ]
    assert stale == []
