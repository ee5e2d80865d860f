"""POST /api/v1/executions/pause|resume|cancel|retry: one move for every run of the account a filter matches.

The filter is the body (status, workflow, contact, created_after, created_before; at least one); `dry_run`
(body or `?dry_run=true`) counts only. Each run is moved by the one-run service in its own transaction.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from jobs.public.api import DRY_RUN, BulkFilterIn, BulkOut, bulk_answer, bulk_request
from workflows.api.serializers import EXECUTION_STATUS_CHOICES
from workflows.api.views import ExecutionView
from workflows.application.bulk_runs import runs_bulk_move
from workflows.domain.execution import OPERATOR_MOVES

FILTER_KEYS = ("status", "workflow", "contact", "created_after", "created_before")


class BulkRunsIn(BulkFilterIn):
    filter_keys = FILTER_KEYS
    rows = "run"

    status = serializers.ChoiceField(choices=EXECUTION_STATUS_CHOICES, required=False)
    workflow = serializers.IntegerField(required=False, min_value=1, max_value=10**18 - 1)
    contact = serializers.IntegerField(required=False, min_value=1, max_value=10**18 - 1)
    created_after = serializers.DateTimeField(required=False)
    created_before = serializers.DateTimeField(required=False)
    dry_run = serializers.BooleanField(required=False, default=False)


class BulkRunsView(ExecutionView):
    filters = DRY_RUN
    operation = ""

    def post(self, request: Request) -> Response:
        data, dry_run = bulk_request(BulkRunsIn, request, self.parse_filters())
        outcome = runs_bulk_move(
            account_id=self.account_id,
            operation=self.operation,
            status=data.get("status"),
            workflow_id=data.get("workflow"),
            contact_id=data.get("contact"),
            created_after=data.get("created_after"),
            created_before=data.get("created_before"),
            dry_run=dry_run,
            by=self.operator,
        )
        return bulk_answer(outcome)


def _bulk_view(operation: str) -> type[BulkRunsView]:
    *others, last = sorted(OPERATOR_MOVES[operation])  # the domain's rule, which the moves count by
    allowed = f"{', '.join(others)} or {last}" if others else last

    def post(self, request: Request) -> Response:  # its own function: its own schema
        return BulkRunsView.post(self, request)

    decorated = extend_schema(
        operation_id=f"executions_bulk_{operation}",
        summary=f"{operation.title()} every run a filter matches",
        description=f"Runs {allowed} are moved one by one, each as `POST /executions/{{id}}/{operation}` would; "
        "others are counted as not_allowed. `dry_run` counts only.",
        request=BulkRunsIn,
        responses=BulkOut,
    )(post)
    return type(f"BulkRuns{operation.title()}View", (BulkRunsView,), {"operation": operation, "post": decorated})


BulkRunsPauseView = _bulk_view("pause")
BulkRunsResumeView = _bulk_view("resume")
BulkRunsCancelView = _bulk_view("cancel")
BulkRunsRetryView = _bulk_view("retry")
