"""Problems found in sending settings, each with the path of the value it is about."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Problem:
    path: str  # e.g. steps[2].config.send_window.hours[0]
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class Problems:
    """Collected while reading settings, so every problem is reported at once and nothing is stored."""

    items: list[Problem] = field(default_factory=list)

    def add(self, path: str, reason: str) -> None:
        self.items.append(Problem(path, reason))

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.items)
