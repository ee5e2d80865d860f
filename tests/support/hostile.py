"""A contact made of markup, and a check that a page shows it as text.

Each hostile value carries `data-pwned=<where it came from>`: on a page, that attribute on a real element means
the value became markup (a tag or an attribute), whatever the browser would then run. The same words as text
mean the page shows the value, as it should, escaped.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import Any

FIRST_NAME = "<img src=x onerror=alert(7) data-pwned=first_name>"
LAST_NAME = '"><svg onload=alert(7) data-pwned=last_name>'
EMAIL = "'\"><img src=x onerror=alert(7) data-pwned=email>@example.com"
CUSTOM_KEY = "<img src=x onerror=alert(7) data-pwned=key>"
CUSTOM_VALUE = "</script><script data-pwned=value>alert(7)</script>"
PLAN = '" onmouseover="alert(7)" data-pwned="plan'  # breaks out of a double-quoted attribute, if unescaped
TAG = "<img src=x onerror=alert(7) data-pwned=tag>"
WEBHOOK_ANSWER = '{"name": "<img src=x onerror=alert(7) data-pwned=response>"}'
EVERY_FIELD = frozenset({"first_name", "last_name", "email", "key", "value", "plan", "tag"})
_SHOWN = re.compile(r"data-pwned=(?:\\*[\"']|\\u0022)?(\w+)")  # also inside JSON (\" or \u0022)


def hostile_contact(account: Any, **extra: Any) -> Any:
    """A contact of `account` whose every text is markup. The email is written as stored data, past the
    services (an address from before a rule, a restore): what a page shows is whatever is stored."""
    from contacts.application.services import contact_create
    from contacts.infrastructure.models import Contact

    contact = contact_create(
        account_id=account.pk,
        email="hostile@example.com",
        phone="",
        first_name=FIRST_NAME,
        last_name=LAST_NAME,
        custom_fields={CUSTOM_KEY: CUSTOM_VALUE, "plan": PLAN},
        tags=[TAG],
        **extra,
    )
    Contact.objects.filter(pk=contact.pk).update(email=EMAIL)
    contact.refresh_from_db()
    return contact


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.injected: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "data-pwned":
                self.injected.append(f"<{tag} data-pwned={value}>")

    handle_startendtag = handle_starttag


def injected(page: str) -> list[str]:
    """The hostile values that became elements or attributes on `page` (none, when the page is inert)."""
    parser = _Elements()
    parser.feed(page)
    parser.close()
    return parser.injected


def shown(page: str) -> set[str]:
    """Which hostile values `page` shows (as text, in an attribute's value, or in a script's JSON)."""
    return set(_SHOWN.findall(html.unescape(page)))
