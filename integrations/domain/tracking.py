"""Email engagement tracking: which links of an email go through Relay, and where its open pixel goes.

Plain text in, plain text out: the links' new addresses come from a callable
(the application signs them), so the rules here need no key and no Django.
A link is tracked when it is an absolute http(s) URL; anything the callable
declines (Relay's own unsubscribe link, an address already tracked) stays as
written, as do mailto:, tel: and in-page links.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from html import escape, unescape

# Which email of which run: what an open or a click is recorded against.
TRACKED_SCHEMES = ("http://", "https://")


@dataclass(frozen=True)
class EmailTracking:
    """The email a step of a run sends: its opens and clicks become events on the contact with these."""

    run_id: str  # the execution's id
    step_key: str  # the step that sent it


# Given a link's target URL: its tracked address, or None to leave it as written.
LinkRewriter = Callable[[str], str | None]

_HREF = re.compile(r"""(<a\b[^>]*?\bhref\s*=\s*)(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE | re.DOTALL)
_TEXT_URL = re.compile(r"""https?://[^\s<>"']+""", re.IGNORECASE)
_TRAILING = ".,;:!?)]}>"


@dataclass(frozen=True)
class TrackedBody:
    text: str
    html: str | None
    links: int  # links rewritten, in both parts


def track_email(text: str, html: str | None, rewrite: LinkRewriter, pixel_url: str | None) -> TrackedBody:
    """Rewrite the links of both parts through `rewrite`, and put the open pixel at the end of the HTML part."""
    count = 0

    def html_link(match: re.Match[str]) -> str:
        nonlocal count
        raw = match.group(2) if match.group(2) is not None else match.group(3)
        target = unescape(raw).strip()
        if not target.lower().startswith(TRACKED_SCHEMES):
            return match.group(0)
        tracked = rewrite(target)
        if tracked is None:
            return match.group(0)
        count += 1
        return f'{match.group(1)}"{escape(tracked, quote=True)}"'

    def text_link(match: re.Match[str]) -> str:
        nonlocal count
        url = match.group(0)
        stripped = url.rstrip(_TRAILING)
        tail = url[len(stripped) :]
        tracked = rewrite(stripped) if stripped else None
        if tracked is None:
            return url
        count += 1
        return f"{tracked}{tail}"

    new_text = _TEXT_URL.sub(text_link, text)
    new_html = _HREF.sub(html_link, html) if html is not None else None
    if new_html is not None and pixel_url:
        new_html = with_pixel(new_html, pixel_url)
    return TrackedBody(new_text, new_html, count)


def with_pixel(html: str, pixel_url: str) -> str:
    """The 1x1 image whose loading is the open, just before </body> (or at the end)."""
    pixel = (
        f'<img src="{escape(pixel_url, quote=True)}" width="1" height="1" alt="" '
        'style="display:block;width:1px;height:1px;border:0" />'
    )
    at = html.lower().rfind("</body>")
    return f"{html[:at]}{pixel}{html[at:]}" if at >= 0 else f"{html}{pixel}"
