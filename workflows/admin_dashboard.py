"""The operators' dashboard: runs and jobs at a glance, charts drawn on the server as SVG (pygal, no CDN).

Staff with the jobs permission (`jobs.view_job`) see it, each number as its own page would show it to them:
runs of the accounts they are members of, jobs of those where their role may see jobs (`Permission.VIEW_JOBS`,
as the jobs admin). Superusers see every account, the system's jobs and the workers too. Every number is read
at page load.
"""

from __future__ import annotations

from typing import Any

import pygal
from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.safestring import mark_safe
from pygal.style import Style

from accounts.admin_scoping import allowed_account_ids, role_account_ids
from accounts.domain.roles import Permission
from workflows.application.stats import Dashboard, Series, dashboard

STATUS_COLOURS = {
    "completed": "#2e7d32",
    "failed": "#c62828",
    "active": "#3f51b5",
    "queued": "#90a4ae",
    "waiting": "#1e88e5",
    "paused": "#d08a00",
    "cancelled": "#9e9e9e",
}
DASHBOARD_PERMISSION = "jobs.view_job"


def _style(colours: list[str]) -> Style:
    return Style(
        background="transparent",
        plot_background="transparent",
        foreground="#444",
        foreground_strong="#222",
        foreground_subtle="#ddd",
        colors=tuple(colours),
        font_family="-apple-system, Segoe UI, Roboto, sans-serif",
        label_font_size=11,
        major_label_font_size=11,
        legend_font_size=12,
        value_font_size=10,
        tooltip_font_size=12,
    )


def series_chart(series: Series, *, labels: list[str], title: str, every: int = 1) -> str:
    """A stacked bar chart of runs per period by status, as inline SVG text with its numbers in titles."""
    statuses = [s for s in STATUS_COLOURS if series.total(s)] or ["completed"]
    chart = pygal.StackedBar(
        style=_style([STATUS_COLOURS[s] for s in statuses]),
        height=260,
        width=900,
        show_legend=True,
        legend_at_bottom=True,
        legend_at_bottom_columns=len(statuses),
        x_label_rotation=0,
        show_minor_x_labels=False,
        truncate_legend=-1,
        truncate_label=-1,
        js=[],  # no script from anywhere: the chart is plain SVG
        disable_xml_declaration=True,
        title=title,
        print_values=False,
        margin=8,
    )
    chart.x_labels = labels
    chart.x_labels_major = labels[::every]
    peak = max((sum(values) for values in zip(*series.by_status.values(), strict=False)), default=0)
    chart.y_labels = _whole_numbers(peak)
    for status in statuses:
        chart.add(status, series.by_status.get(status, []))
    return mark_safe(chart.render(is_unicode=True))  # noqa: S308 - pygal's own SVG, from our numbers only


def _whole_numbers(peak: int) -> list[int]:
    """Y axis labels for counts: whole numbers, about five of them."""
    step = max(1, -(-peak // 5))
    return list(range(0, max(peak, 1) + step, step))


def status_bars(counts: dict[str, int], *, title: str) -> str:
    order = ["pending", "running", "retrying", "completed", "failed", "dead", "cancelled"]
    colours = {
        "pending": "#90a4ae",
        "running": "#3f51b5",
        "retrying": "#1e88e5",
        "completed": "#2e7d32",
        "failed": "#c62828",
        "dead": "#6d1b1b",
        "cancelled": "#9e9e9e",
    }
    present = [s for s in order if counts.get(s)] or ["pending"]
    chart = pygal.HorizontalBar(
        style=_style([colours[s] for s in present]),
        height=40 + 34 * len(present),
        width=440,
        show_legend=True,
        legend_at_bottom=False,
        js=[],
        disable_xml_declaration=True,
        title=title,
        print_values=True,
        margin=6,
    )
    for status in present:
        chart.add(status, [counts.get(status, 0)])
    return mark_safe(chart.render(is_unicode=True))  # noqa: S308


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f} %"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "none due"
    seconds = max(seconds, 0)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@staff_member_required
def dashboard_view(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm(DASHBOARD_PERMISSION):
        raise PermissionDenied("The dashboard needs the permission to view jobs.")
    from django.contrib import admin

    data: Dashboard = dashboard(
        account_ids=allowed_account_ids(request), job_account_ids=role_account_ids(request, Permission.VIEW_JOBS)
    )
    local = timezone.localtime
    hours = [local(p).strftime("%H:00") for p in data.runs_per_hour.periods]
    days = [local(p).strftime("%d %b") for p in data.runs_per_day.periods]
    context: dict[str, Any] = {
        **admin.site.each_context(request),
        "title": "Dashboard",
        "data": data,
        "hour_chart": series_chart(data.runs_per_hour, labels=hours, title="Runs started per hour (24 h)", every=3),
        "day_chart": series_chart(data.runs_per_day, labels=days, title="Runs started per day (30 days)", every=5),
        "job_chart": status_bars(data.jobs_by_status, title="Jobs by status"),
        "hour_totals": {s: data.runs_per_hour.total(s) for s in STATUS_COLOURS},
        "runs_24h": sum(data.runs_per_hour.total(s) for s in STATUS_COLOURS),
        "day_totals": {s: data.runs_per_day.total(s) for s in STATUS_COLOURS},
        "failure_rate": _percent(data.failure_rate),
        "job_failure_rate": _percent(data.job_failure_rate),
        "run_failure_rate": _percent(data.run_failure_rate),
        "oldest_due": _age(data.oldest_due_age_seconds),
        "show_workers": request.user.is_superuser,
    }
    return TemplateResponse(request, "admin/relay/dashboard.html", context)
