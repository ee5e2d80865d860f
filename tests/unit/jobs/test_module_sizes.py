"""No module of the queue's application layer grows past 400 lines (issue 22): a part that needs more is
two parts, each named after what it does (as `jobs/application/worker/` and `queue_counts` were split out)."""

from pathlib import Path

import jobs.application

LIMIT = 400
APPLICATION = Path(jobs.application.__file__).parent


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_application_layer_has_modules_to_measure():
    modules = list(APPLICATION.rglob("*.py"))
    assert len(modules) > 20  # the walk found the package, its subpackages too
    assert APPLICATION / "worker" / "loop.py" in modules


def test_no_module_of_jobs_application_is_over_400_lines():
    too_long = {
        str(path.relative_to(APPLICATION)): n for path in APPLICATION.rglob("*.py") if (n := _lines(path)) > LIMIT
    }
    assert not too_long, f"split these (lines over {LIMIT}): {too_long}"
