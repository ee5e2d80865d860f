"""POST /api/v1/admin/jobs/retry and /cancel: an operator's retry or cancel of every job a filter matches.

The filter is the body (status, queue, handler, account, created_after, created_before; at least one);
`dry_run` (in the body, or `?dry_run=true`) counts without changing. The service changes a batch per
transaction and answers how many matched, changed, and were not in a state that allows it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.filters import Boolean, FilterSet
from api.problems import InvalidInput
from api.serializers import StrictSerializer
from jobs.api.serializers import JOB_STATUS_CHOICES
from jobs.api.views import OperatorJobView
from jobs.application.operations import BulkOutcome, job_bulk_cancel, job_bulk_retry

FILTER_KEYS = ("status", "queue", "handler", "account", "created_after", "created_before")
DRY_RUN = FilterSet(Boolean("dry_run", "Count what would change, change nothing."))


class BulkFilterIn(StrictSerializer):
    """A bulk operation's body: a filter, at least one of `filter_keys` (an empty filter would match every
    row: "retry everything" is never a default), and dry_run. The runs' bulk moves use it too."""

    filter_keys: ClassVar[tuple[str, ...]] = ()
    rows: ClassVar[str] = "row"

    @classmethod
    def schema_extra(cls, *, patch: bool) -> dict[str, Any]:
        return {"anyOf": [{"required": [key]} for key in cls.filter_keys]}

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        if not any(key in data for key in self.filter_keys):
            keys = ", ".join(self.filter_keys)
            raise serializers.ValidationError(
                {"": [f"give at least one filter ({keys}): an empty filter would match every {self.rows}"]}
            )
        return data


def bulk_request(serializer: type[BulkFilterIn], request: Request, query: dict[str, Any]) -> tuple[dict, bool]:
    """The filter of a bulk operation's body, and whether it is a dry run (`dry_run` in the body or the query)."""
    body = serializer(data=request.data if request.data is not None else {})
    if not body.is_valid():
        raise InvalidInput([{"field": k, "message": str(m[0])} for k, m in body.errors.items()])
    data = dict(body.validated_data)
    return data, bool(data.pop("dry_run", False) or query.get("dry_run", False))


class BulkJobsIn(BulkFilterIn):
    filter_keys = FILTER_KEYS
    rows = "job"

    status = serializers.ChoiceField(choices=JOB_STATUS_CHOICES, required=False)
    queue = serializers.CharField(required=False, max_length=100)
    handler = serializers.CharField(required=False, max_length=200)
    account = serializers.CharField(required=False, max_length=80, help_text="An account's id or slug.")
    created_after = serializers.DateTimeField(required=False)
    created_before = serializers.DateTimeField(required=False)
    dry_run = serializers.BooleanField(required=False, default=False)


@extend_schema_serializer(component_name="BulkOutcome")
class BulkOut(serializers.Serializer):
    matched = serializers.IntegerField(help_text="Rows the filter matched.")
    changed = serializers.IntegerField(help_text="Rows changed (with dry_run: that would be).")
    not_allowed = serializers.IntegerField(help_text="Rows whose state does not allow it (or that moved on meanwhile).")
    conflicts = serializers.IntegerField(help_text="Retries refused: another unfinished job holds the unique key.")
    dry_run = serializers.BooleanField()


def bulk_answer(outcome: BulkOutcome) -> Response:
    return Response(BulkOut(outcome).data)


class _BulkJobsView(OperatorJobView):
    filters = DRY_RUN
    operation = staticmethod(job_bulk_cancel)

    def post(self, request: Request) -> Response:
        data, dry_run = bulk_request(BulkJobsIn, request, self.parse_filters())
        if "account" in data:
            data["account_id"] = self.account_filter(data.pop("account"))
        return bulk_answer(type(self).operation(dry_run=dry_run, **data))


class OperatorJobsBulkRetryView(_BulkJobsView):
    operation = staticmethod(job_bulk_retry)

    @extend_schema(
        operation_id="admin_jobs_bulk_retry",
        summary="Retry every job a filter matches",
        description="Dead, failed and retrying jobs go back to pending now with attempt 0, in batches; others "
        "are counted as not_allowed. `dry_run` counts only.",
        request=BulkJobsIn,
        responses=BulkOut,
    )
    def post(self, request: Request) -> Response:
        return super().post(request)


class OperatorJobsBulkCancelView(_BulkJobsView):
    operation = staticmethod(job_bulk_cancel)

    @extend_schema(
        operation_id="admin_jobs_bulk_cancel",
        summary="Cancel every job a filter matches",
        description="Pending and retrying jobs are cancelled, in batches; others are counted as not_allowed. "
        "`dry_run` counts only.",
        request=BulkJobsIn,
        responses=BulkOut,
    )
    def post(self, request: Request) -> Response:
        return super().post(request)
