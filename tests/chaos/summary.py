"""After `make chaos`: one line per scenario from the report file, and a failure naming every scenario that did
not report (not run for want of time, failed before its figures, or cut off by the hard bound) or broke an
invariant.

    python -m tests.chaos.summary chaos-report.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.chaos.budget import SCENARIOS


def summarise(path: Path) -> tuple[list[str], list[str]]:
    """(lines to print, problems)."""
    reports = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                found = json.loads(line)
                reports[found.get("key")] = found
    lines, problems = [], []
    for scenario in SCENARIOS:
        found = reports.get(scenario.key)
        if found is None:
            problems.append(f"{scenario.key}: no report (not run, failed before its figures, or cut off)")
            continue
        sizes = ", ".join(
            f"{name}={n}" + (f" of {found['full_sizes'][name]}" if n != found["full_sizes"].get(name) else "")
            for name, n in found.get("sizes", {}).items()
        )
        checked = " ".join(f"{k}:{v}" for k, v in found.get("checked", {}).items())
        lines.append(f"{scenario.key:<10} {found.get('seconds')} s; {sizes or 'fixed'}; checked {checked}")
        if found.get("violations"):
            problems.append(f"{scenario.key}: invariants broken: {found['violations']}")
    return lines, problems


def main(argv: list[str]) -> int:
    lines, problems = summarise(Path(argv[1] if len(argv) > 1 else "chaos-report.jsonl"))
    print("chaos scenarios:")
    for line in lines:
        print(f"  {line}")
    for problem in problems:
        print(f"CHAOS FAILED: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
