"""Step templates rendered by Django's template language, fenced in.

Two engines: autoescape off for text (subjects, SMS, webhook bodies) and on
for HTML. Neither loads files or libraries: `{% include %}`, `{% extends %}`,
`{% load %}`, `{% debug %}`, `{% url %}` and `{% csrf_token %}` do not exist
here; `if`, `for`, `with`, `firstof`, `now`, `filter` and all the default
filters do. The context is read-only plain data (workflows.domain.templates),
so a template reaches no object beyond the values it is given.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from django.template import Context, Engine, Library, TemplateSyntaxError, defaultfilters, defaulttags

from workflows.domain.templates import TemplateError
from workflows.domain.validation import is_template

ALLOWED_TAGS = (
    "autoescape",
    "comment",
    "cycle",
    "filter",
    "firstof",
    "for",
    "if",
    "ifchanged",
    "now",
    "resetcycle",
    "spaceless",
    "templatetag",
    "verbatim",
    "widthratio",
    "with",
)
MAX_OUTPUT = 1_000_000

register = Library()
for _name in ALLOWED_TAGS:
    register.tags[_name] = defaulttags.register.tags[_name]
register.filters.update(defaultfilters.register.filters)


class _FencedEngine(Engine):
    # Only this module's library is built in; no loaders, no `{% load %}`able libraries.
    default_builtins = ["workflows.infrastructure.templates"]


@functools.cache
def _engine(autoescape: bool) -> Engine:
    return _FencedEngine(loaders=[], libraries={}, autoescape=autoescape, string_if_invalid="")


@functools.lru_cache(maxsize=2048)
def _compiled(source: str, autoescape: bool):
    return _engine(autoescape).from_string(source)


class DjangoTemplateRenderer:
    """The TemplateRenderer port (workflows.domain.templates) on Django's template language."""

    def render_text(self, source: str, context: Mapping[str, Any]) -> str:
        return self._render(source, context, autoescape=False)

    def render_html(self, source: str, context: Mapping[str, Any]) -> str:
        return self._render(source, context, autoescape=True)

    def check(self, source: str) -> str | None:
        try:
            _compiled(source, False)
        except TemplateSyntaxError as exc:
            return str(exc).splitlines()[0][:300] if str(exc) else "invalid template"
        return None

    def _render(self, source: str, context: Mapping[str, Any], *, autoescape: bool) -> str:
        if not is_template(source):
            return source  # most texts: nothing to fill in
        try:
            output = _compiled(source, autoescape).render(Context(dict(context), autoescape=autoescape))
        except TemplateSyntaxError as exc:
            raise TemplateError(f"template does not compile: {exc}") from None
        except Exception as exc:  # a filter choking on this run's data
            raise TemplateError(f"template could not be rendered: {type(exc).__name__}: {exc}") from None
        if len(output) > MAX_OUTPUT:
            raise TemplateError(f"rendered text is longer than {MAX_OUTPUT:,} characters")
        return output


renderer = DjangoTemplateRenderer()
