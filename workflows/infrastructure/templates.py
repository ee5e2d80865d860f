"""Step templates rendered by Django's template language, fenced in.

Two engines: autoescape off for text (subjects, SMS, webhook bodies) and on
for HTML. Both return a plain `str`, never Django's SafeString: what a step
renders carries contacts' data, and whoever shows it escapes or sanitises it.
Neither loads files or libraries: `{% include %}`, `{% extends %}`,
`{% load %}`, `{% debug %}`, `{% url %}` and `{% csrf_token %}` do not exist
here; `if`, `for`, `with`, `firstof`, `now`, `filter` and all the default
filters do. The context is read-only plain data (workflows.domain.templates),
so a template reaches no object beyond the values it is given.

Bounded, because whoever may edit a workflow writes the template and a worker
renders it: `{{ ""|ljust:"300000000" }}` would allocate 300 MB, nested loops
over a long text would spin for hours, and `{% with %}`s doubling a text grow
it exponentially. So a width or precision over `MAX_WIDTH` (ljust, rjust,
center, stringformat, floatformat) is a syntax error when the workflow is
saved, and every filter checks its arguments again before it runs (they may
come from data); one render may produce at most `MAX_OUTPUT` characters of
text, `MAX_WORK` characters of filter results and `MAX_LOOP_ITERATIONS` loop
passes (nested loops counted). Past a limit the render stops with a
`TemplateError`, a permanent failure: the same template and data would fail
again.
"""

from __future__ import annotations

import contextvars
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from django.template import Context, Engine, Library, Template, TemplateSyntaxError, defaultfilters, defaulttags
from django.template.base import FilterExpression, Lexer, Node, NodeList, Parser, Variable
from django.template.defaulttags import ForNode, WithNode
from django.utils.safestring import SafeString

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
MAX_OUTPUT = 1_000_000  # characters of text one render may produce
MAX_WORK = 5_000_000  # characters all filter results of one render may add up to
MAX_WIDTH = 1_000  # the widest padding, format width or precision a filter may ask for
MAX_LOOP_ITERATIONS = 10_000  # loop passes in one render, nested loops counted
WIDTH_FILTERS = frozenset({"ljust", "rjust", "center", "stringformat", "floatformat"})
_NUMBERS = re.compile(r"\d+")


class TemplateLimitError(Exception):
    """A render went past one of the limits above."""


def width_problem(name: str, arg: Any) -> str | None:
    """Why a width filter's argument is refused, or None. Arguments Django itself cannot parse are its concern."""
    if name not in WIDTH_FILTERS:
        return None
    text = str(arg)
    if name == "stringformat" and "*" in text:
        return "stringformat may not take its width from the value (*)"
    widths = [int(n) for n in _NUMBERS.findall(text)] if name in ("stringformat", "floatformat") else []
    if name in ("ljust", "rjust", "center"):
        try:
            widths = [abs(int(text))]
        except ValueError:
            return None
    if any(width > MAX_WIDTH for width in widths):
        return f"{name}'s width {text[:20]} is over the limit of {MAX_WIDTH:,}"
    return None


@dataclass
class _Budget:
    output: int = 0
    work: int = 0
    iterations: int = 0
    # Why the render was stopped, once it was. Sticky: `{% if %}` swallows any exception raised while it
    # evaluates `or`/`and`/`==`/`in` (Django's smartif returns False), so the first stop must also refuse
    # every later filter, loop and text at once, and the render is refused at its end.
    stopped: str | None = None


def _stop(reason: str) -> NoReturn:
    budget = _budget.get()
    if budget is not None and budget.stopped is None:
        budget.stopped = reason
    raise TemplateLimitError(reason)


def _refuse_if_stopped() -> None:
    budget = _budget.get()
    if budget is not None and budget.stopped is not None:
        raise TemplateLimitError(budget.stopped)


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("relay_template_budget", default=None)


def _spend_work(size: int, what: str) -> None:
    if size > MAX_OUTPUT:
        _stop(f"{what} is longer than {MAX_OUTPUT:,} characters")
    budget = _budget.get()
    if budget is not None:
        budget.work += size
        if budget.work > MAX_WORK:
            _stop(f"the template's filters produced more than {MAX_WORK:,} characters")


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` checking its width argument before it runs and the size of what it returns."""

    @functools.wraps(func)  # keeps is_safe, needs_autoescape ... and __wrapped__ for Django's argument count
    def bounded(value: Any, *args: Any, **kwargs: Any) -> Any:
        _refuse_if_stopped()
        if args:
            problem = width_problem(name, args[0])
            if problem:
                _stop(problem)
            if name == "join" and hasattr(value, "__len__"):
                _spend_work(len(str(args[0])) * max(len(value) - 1, 0), "the text join would build")
        result = func(value, *args, **kwargs)
        if isinstance(result, str | list | tuple):
            _spend_work(len(result), f"the result of the {name} filter")
        return result

    bounded.relay_filter_name = name  # type: ignore[attr-defined]
    return bounded


register = Library()
for _name in ALLOWED_TAGS:
    register.tags[_name] = defaulttags.register.tags[_name]
for _name, _filter in defaultfilters.register.filters.items():
    register.filters[_name] = _bounded_filter(_name, _filter)


class _CountedSequence:
    """A `{% for %}` sequence that counts its passes against the render's budget before the loop starts."""

    def __init__(self, expression: FilterExpression) -> None:
        self.expression = expression

    def resolve(self, context: Context, ignore_failures: bool = False) -> Any:
        _refuse_if_stopped()
        values = self.expression.resolve(context, ignore_failures=ignore_failures)
        if values is None or hasattr(values, "__len__"):
            count = len(values) if values is not None else 0
        else:
            values = list(_take(values, MAX_LOOP_ITERATIONS + 1))
            count = len(values)
        budget = _budget.get()
        if budget is not None:
            budget.iterations += count
            count = budget.iterations
        if count > MAX_LOOP_ITERATIONS:
            _stop(f"the template's loops ran more than {MAX_LOOP_ITERATIONS:,} times")
        return values

    def __str__(self) -> str:
        return str(self.expression)


def _take(values: Any, limit: int) -> Any:
    for index, value in enumerate(values):
        if index >= limit:
            return
        yield value


def _charging(render: Callable[[Context], str]) -> Callable[[Context], str]:
    """A leaf node's render that counts its text against the render's output budget."""

    def charged(context: Context) -> str:
        _refuse_if_stopped()
        output = render(context)
        budget = _budget.get()
        if budget is not None:
            budget.output += len(output)
            if budget.output > MAX_OUTPUT:
                _stop(f"rendered text is longer than {MAX_OUTPUT:,} characters")
        return output

    return charged


class _BoundedParser(Parser):
    def compile_filter(self, token: str) -> FilterExpression:
        """Refuses a literal width over the limit when the template is compiled, i.e. when the workflow is saved."""
        expression = super().compile_filter(token)
        for func, args in expression.filters:
            name = getattr(func, "relay_filter_name", "")
            for lookup, arg in args:
                problem = None if lookup else width_problem(name, arg)
                if problem:
                    raise TemplateSyntaxError(problem)
        return expression

    def extend_nodelist(self, nodelist: NodeList, node: Node, token: Any) -> None:
        if isinstance(node, ForNode) and not isinstance(node.sequence, _CountedSequence):
            # Instrumenting Django's nodes in place (the stubs type `sequence` as the parsed expression only).
            node.sequence = _CountedSequence(node.sequence)  # type: ignore[assignment, arg-type]
        is_container = any(isinstance(getattr(node, attr, None), NodeList) for attr in node.child_nodelists)
        if not is_container:  # containers' text is their children's, already counted
            # A leaf's render is wrapped on the instance, by design; the stubs type it as a method of the class.
            node.render_annotated = _charging(node.render_annotated)  # type: ignore[method-assign, assignment, arg-type]
        super().extend_nodelist(nodelist, node, token)


class _BoundedTemplate(Template):
    def compile_nodelist(self) -> NodeList:
        parser = _BoundedParser(
            Lexer(self.source).tokenize(), self.engine.template_libraries, self.engine.template_builtins, self.origin
        )
        nodelist = parser.parse()
        self.extra_data = parser.extra_data
        return nodelist

    def render(self, context: Context) -> SafeString:
        budget = _Budget()
        token = _budget.set(budget)
        try:
            output = super().render(context)
            if budget.stopped is not None:  # stopped where a tag swallowed the error: refused all the same
                raise TemplateLimitError(budget.stopped)
            return output
        finally:
            _budget.reset(token)


class _FencedEngine(Engine):
    # Only this module's library is built in; no loaders, no `{% load %}`able libraries.
    default_builtins = ["workflows.infrastructure.templates"]

    def from_string(self, template_code: str) -> Template:
        return _BoundedTemplate(template_code, engine=self)


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

    def variables(self, source: str) -> list[tuple[str, ...]]:
        """The variables `source` reads from the run's context, as lookup paths (`("contact", "first_name")`).

        Names a template binds itself (`{% for tag in contact.tags %}`, `{% with x=... %}`, `as x`,
        `forloop`) are not the context's and are left out; a template that does not compile has none.
        """
        if not is_template(source):
            return []
        try:
            template = _compiled(source, False)
        except TemplateSyntaxError:
            return []
        bound_anywhere = _names_bound_with_as(template.nodelist)
        found: list[tuple[str, ...]] = []
        _walk_nodes(template.nodelist, bound_anywhere, found)
        return list(dict.fromkeys(found))

    def _render(self, source: str, context: Mapping[str, Any], *, autoescape: bool) -> str:
        if not is_template(source):
            return source  # most texts: nothing to fill in
        try:
            output = _compiled(source, autoescape).render(Context(dict(context), autoescape=autoescape))
        except TemplateSyntaxError as exc:
            raise TemplateError(f"template does not compile: {exc}") from None
        except TemplateLimitError as exc:
            raise TemplateError(f"template stopped: {exc}") from None
        except Exception as exc:  # a filter choking on this run's data
            raise TemplateError(f"template could not be rendered: {type(exc).__name__}: {exc}") from None
        if len(output) > MAX_OUTPUT:
            raise TemplateError(f"rendered text is longer than {MAX_OUTPUT:,} characters")
        # Django hands back a SafeString, which every Django template then shows unescaped: a contact's
        # `<img onerror=...>` first name, rendered into a text part, would be markup on whatever page shows
        # it. What a step renders is data, never markup to trust: a plain str, escaped wherever it is shown
        # (an HTML part is sanitised, nh3, where it is displayed).
        return str.__str__(output)


def _names_bound_with_as(nodelist: NodeList) -> frozenset[str]:
    """`{% cycle ... as x %}`, `{% firstof ... as x %}`, `{% now ... as x %}`, `{% widthratio ... as x %}`."""
    names = set()
    for node in _all_nodes(nodelist):
        for attribute in ("variable_name", "asvar"):
            value = getattr(node, attribute, None)
            if isinstance(value, str) and value:
                names.add(value)
    return frozenset(names)


def _all_nodes(nodelist: NodeList) -> Any:
    for node in nodelist:
        yield node
        for child in _child_nodelists(node):
            yield from _all_nodes(child)


def _child_nodelists(node: Node) -> list[NodeList]:
    children = [getattr(node, name) for name in node.child_nodelists if isinstance(getattr(node, name, None), NodeList)]
    for value in vars(node).values():
        if isinstance(value, list):  # IfNode.conditions_nodelists: [(condition, nodelist), ...]
            children.extend(item[1] for item in value if isinstance(item, tuple) and isinstance(item[-1], NodeList))
    return children


def _walk_nodes(nodelist: NodeList, bound: frozenset[str], found: list[tuple[str, ...]]) -> None:
    for node in nodelist:
        inner = bound
        if isinstance(node, ForNode):
            inner = bound | set(node.loopvars) | {"forloop"}
        elif isinstance(node, WithNode):
            inner = bound | set(node.extra_context)
        for name, value in vars(node).items():
            if name not in ("token", "origin") and not isinstance(value, NodeList):
                _collect(value, bound, found)
        for child in _child_nodelists(node):
            _walk_nodes(child, inner, found)


def _collect(value: Any, bound: frozenset[str], found: list[tuple[str, ...]], depth: int = 0) -> None:
    """Every context lookup inside a node's attribute: filter expressions, `if` conditions, their arguments."""
    if depth > 20:
        return
    if isinstance(value, _CountedSequence):
        value = value.expression
    if isinstance(value, FilterExpression):
        _collect(value.var, bound, found, depth + 1)
        for _func, args in value.filters:
            for lookup, arg in args:
                if lookup:
                    _collect(arg, bound, found, depth + 1)
    elif isinstance(value, Variable):
        if value.lookups and value.lookups[0] not in bound:
            found.append(tuple(value.lookups))
    elif isinstance(value, list | tuple):
        for item in value:
            if not isinstance(item, NodeList):
                _collect(item, bound, found, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, bound, found, depth + 1)
    elif hasattr(value, "first") or hasattr(value, "value"):  # an `if` condition (django.template.smartif)
        for attribute in ("value", "first", "second"):
            inner = getattr(value, attribute, None)
            if inner is not None and inner is not value:
                _collect(inner, bound, found, depth + 1)


renderer = DjangoTemplateRenderer()
