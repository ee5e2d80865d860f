"""One door: no module but the door (integrations/application/outbound.py) reaches the email, SMS and voice
channel adapters, so every message is judged by the sending rules and recorded in the ledger before it leaves.

Read from the source (every project module outside tests/), not by importing: a call hidden behind an import
alias (`from integrations.application import channels as c; c.sms_channel()`) is found too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FACTORIES = {"email_channel", "sms_channel", "voice_channel"}
ADAPTERS = {
    "DjangoMailEmailChannel",
    "TwilioSmsChannel",
    "TwilioVoiceChannel",
    "ConsoleEmailChannel",
    "ConsoleSmsChannel",
    "ConsoleVoiceChannel",
}
DOOR = "integrations/application/outbound.py"
FACTORY_HOME = "integrations/application/channels.py"  # where the factories build the adapters
# Not through the door yet: each comes off this list as it is wired (docs/decisions/the-door-and-the-ledger.md).
NOT_YET: set[str] = set()


def project_modules() -> list[Path]:
    skip = {".venv", "tests", "node_modules", ".git", "browser-artifacts"}
    return [
        path
        for path in ROOT.rglob("*.py")
        if not skip & set(path.relative_to(ROOT).parts) and "migrations" not in path.parts
    ]


def reaches(path: Path) -> set[str]:
    """The factory and adapter names a module imports or uses."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found |= {alias.name for alias in node.names} & (FACTORIES | ADAPTERS)
        elif isinstance(node, ast.Attribute) and node.attr in FACTORIES | ADAPTERS:
            found.add(node.attr)
        elif isinstance(node, ast.Name) and node.id in ADAPTERS:
            found.add(node.id)
    return found


def test_only_the_door_calls_the_channel_factories_and_only_the_factories_build_adapters():
    modules = project_modules()
    assert len(modules) > 100  # the walk found the project
    offenders = {}
    for path in modules:
        name = path.relative_to(ROOT).as_posix()
        used = reaches(path)
        if name == FACTORY_HOME:
            continue  # defines the factories and builds the adapters
        if name.startswith("integrations/infrastructure/"):
            used -= ADAPTERS  # where the adapters are defined
        if name == DOOR:
            used -= FACTORIES
        if used and name not in NOT_YET:
            offenders[name] = sorted(used)
    assert offenders == {}, f"modules that reach a channel adapter without the door: {offenders}"


def test_the_list_of_modules_not_yet_through_the_door_is_true():
    """A module wired through the door leaves NOT_YET: the list never hides a module that no longer needs it."""
    for name in NOT_YET:
        assert reaches(ROOT / name), f"{name} no longer reaches a channel adapter: take it off NOT_YET"


def test_the_door_is_what_calls_the_factories():
    assert reaches(ROOT / DOOR) >= FACTORIES
