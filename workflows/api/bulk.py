"""POST /api/v1/executions/pause|resume|cancel|retry: one move for every run of the account a filter matches.

The filter is the body (status, workflow, contact, created_after, created_before; at least one); `dry_run`
(body or `?dry_run=true`) counts only. Each run is moved by the one-run service in its own transaction.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.problems import InvalidInput
from api.serializers import StrictSerializer
from jobs.api.bulk import DRY_RUN, BulkOut, bulk_answer
from workflows.api.serializers import EXECUTION_STATUS_CHOICES
from workflows.api.views import ExecutionView
from workflows.application.bulk_runs import runs_bulk_move

FILTER_KEYS = ("status", "workflow", "contact", "created_after", "created_before")


class BulkRunsIn(StrictSerializer):
    status = serializers.ChoiceField(choices=EXECUTION_STATUS_CHOICES, required=False)
    workflow = serializers.IntegerField(required=False, min_value=1, max_value=10**18 - 1)
    contact = serializers.IntegerField(required=False, min_value=1, max_value=10**18 - 1)
    created_after = serializers.DateTimeField(required=False)
    created_before = serializers.DateTimeField(required=False)
    dry_run = serializers.BooleanField(required=False, default=False)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if not any(key in data for key in FILTER_KEYS):
            raise serializers.ValidationError(
                {"": [f"give at least one filter ({', '.join(FILTER_KEYS)}): an empty filter would match every run"]}
            )
        return data


class BulkRunsView(ExecutionView):
    filters = DRY_RUN
    operation = ""

    def post(self, request: Request) -> Response:
        query = self.parse_filters()
        body = BulkRunsIn(data=request.data if request.data is not None else {})
        if not body.is_valid():
            raise InvalidInput([{"field": k, "message": str(m[0])} for k, m in body.errors.items()])
        data = dict(body.validated_data)
        outcome = runs_bulk_move(
            account_id=self.account_id,
            operation=self.operation,
            status=data.get("status"),
            workflow_id=data.get("workflow"),
            contact_id=data.get("contact"),
            created_after=data.get("created_after"),
            created_before=data.get("created_before"),
            dry_run=bool(data.get("dry_run") or query.get("dry_run", False)),
        )
        return bulk_answer(outcome)


def _bulk_view(operation: str, allowed: str) -> type[BulkRunsView]:
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


BulkRunsPauseView = _bulk_view("pause", "queued, active or waiting")
BulkRunsResumeView = _bulk_view("resume", "paused")
BulkRunsCancelView = _bulk_view("cancel", "not yet ended")
BulkRunsRetryView = _bulk_view("retry", "failed")
