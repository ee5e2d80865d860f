"""The notes hold together: every relative link in the README, DDD_NOTES, bench/README and docs/ reaches a file
(and, with a #fragment, a heading of it), and every page under docs/ is reachable from docs/README.md, so a
page moved, renamed or added without its index entry fails here rather than in a newcomer's browser."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
INDEX = DOCS / "README.md"

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")
# [text](target) and ![alt](target), with an optional "title"; the text may hold one level of brackets.
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _pages() -> list[Path]:
    pages = [ROOT / "README.md", ROOT / "DDD_NOTES.md", ROOT / "bench" / "README.md", *DOCS.rglob("*.md")]
    return sorted(page for page in pages if page.is_file())


def _prose(text: str) -> str:
    """The text with code blocks and inline code blanked out (keeping line numbers): links there are examples."""
    text = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return _CODE.sub("", text)


def _links(page: Path) -> list[tuple[int, str]]:
    text = _prose(page.read_text())
    return [(text[: m.start()].count("\n") + 1, m.group(1)) for m in _LINK.finditer(text)]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors by its text
    kept = "".join(c for c in heading.lower() if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text())):
        slug, n = _slug(heading), 1
        while slug in found:  # GitHub numbers repeated headings: x, x-1, x-2
            slug = f"{_slug(heading)}-{n}"
            n += 1
        found.add(slug)
    return found


def _target(page: Path, link: str) -> tuple[Path, str]:
    path, _, fragment = link.partition("#")
    return ((page.parent / unquote(path)).resolve() if path else page), unquote(fragment)


def test_the_pages_exist():
    assert {ROOT / "README.md", ROOT / "DDD_NOTES.md", INDEX} <= set(_pages())


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_its_heading(page: Path):
    broken = []
    for line, link in _links(page):
        if _SCHEME.match(link) or link.startswith("//"):
            continue  # a web address: not this tree's to check
        target, fragment = _target(page, link)
        if not target.exists():
            broken.append(f"{page.relative_to(ROOT)}:{line} {link}: no such file")
        elif fragment and target.suffix == ".md" and fragment not in _anchors(target):
            broken.append(f"{page.relative_to(ROOT)}:{line} {link}: no heading #{fragment}")
    assert broken == []


def test_every_docs_page_is_linked_from_the_docs_index():
    linked = {_target(INDEX, link)[0] for _, link in _links(INDEX) if not _SCHEME.match(link)}
    missing = [str(p.relative_to(ROOT)) for p in sorted(DOCS.rglob("*.md")) if p != INDEX and p not in linked]
    assert missing == []


def test_the_checks_see_a_broken_link(tmp_path: Path):
    """The parser finds links the way a reader does: in prose, not in code; a missing page or heading is named."""
    page = tmp_path / "page.md"
    page.write_text(
        "# A title: with `code`\n\n[ok](#a-title-with-code) [gone](missing.md) `[no](code.md)`\n"
        "```\n[no](fenced.md)\n```\n[bad anchor](#nowhere) [web](https://example.com/x.md)\n"
    )
    assert _links(page) == [
        (3, "#a-title-with-code"),
        (3, "missing.md"),
        (7, "#nowhere"),
        (7, "https://example.com/x.md"),
    ]
    assert _anchors(page) == {"a-title-with-code"}
    assert not _target(page, "missing.md")[0].exists()
