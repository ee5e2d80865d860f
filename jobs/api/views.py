"""The queue over HTTP: an account's own jobs, and the operators' view across accounts.

Thin: every read and every change is a jobs.application.operations call.
"""

from uuid import UUID

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.application.selectors import account_by_ref
from accounts.domain.roles import Permission
from api.filters import Choice, FilterSet, Text
from api.problems import Conflict, InvalidInput, InvalidState, NotFound
from api.schema import problems
from api.views import AccountView, OperatorView
from jobs.api.serializers import JobOut, JobStatsOut, OperatorJobOut
from jobs.application.operations import JobConflict, JobNotFound, job_cancel, job_get, job_list, job_retry, job_stats
from jobs.domain.states import IllegalJobTransition, JobStatus
from jobs.infrastructure.database import with_account

JOB_ERRORS = {
    JobNotFound: lambda e: NotFound(),
    IllegalJobTransition: lambda e: InvalidState(str(e), current_state=e.current.value),
    # The service's message names the unique key, which may echo the payload: not repeated here.
    JobConflict: lambda e: Conflict("Another unfinished job holds this job's unique key; finish or cancel it first."),
}


class AccountJobView(AccountView):
    """The caller's account's jobs, for roles holding view_jobs (owner and admin by default)."""

    read_permission = Permission.VIEW_JOBS
    domain_errors = JOB_ERRORS
    ordering = ("-id",)  # newest first: job ids are uuid7, made at enqueue (no index on created_at)


class AccountJobListView(AccountJobView):
    filters = FilterSet(Choice("state", JobStatus, "Only jobs in this state."))

    @extend_schema(operation_id="jobs_list", summary="The account's jobs, newest first", responses=JobOut(many=True))
    def get(self, request: Request) -> Response:
        state = self.parse_filters().get("state")
        return self.paginated(job_list(account_id=self.account_id, status=state), JobOut)


class AccountJobDetailView(AccountJobView):
    @extend_schema(operation_id="jobs_read", summary="One of the account's jobs", responses=JobOut)
    def get(self, request: Request, job_id: UUID) -> Response:
        return Response(JobOut(job_get(job_id=job_id, account_id=self.account_id)).data)


class OperatorJobView(OperatorView):
    domain_errors = JOB_ERRORS
    ordering = ("-id",)  # newest first, as above

    def account_filter(self, ref: str | None) -> int | None:
        if ref is None:
            return None
        account = account_by_ref(ref)
        if account is None:
            raise InvalidInput.field("account", f"no account with id or slug {ref[:80]!r}")
        return account.pk


ACCOUNT_FILTER = Text("account", "Only this account's jobs: its id or its slug.")


class OperatorJobStatsView(OperatorJobView):
    filters = FilterSet(ACCOUNT_FILTER)

    @extend_schema(
        operation_id="admin_jobs_stats",
        summary="Queue health: jobs per status, failure rate, average duration",
        responses=JobStatsOut,
    )
    def get(self, request: Request) -> Response:
        account_id = self.account_filter(self.parse_filters().get("account"))
        stats = job_stats(account_id=account_id)
        return Response(
            JobStatsOut(
                {
                    "counts": stats.counts,
                    "failure_rate": stats.failure_rate,
                    "avg_duration_seconds": stats.avg_duration_seconds,
                    "runs": stats.sections.get("runs", {}),
                    "dead_letters": stats.dead_letters,
                }
            ).data
        )


class OperatorJobListView(OperatorJobView):
    filters = FilterSet(
        Choice("status", JobStatus, "Only jobs in this state."),
        Text("queue", "Only jobs on this queue."),
        Text("handler", "Only jobs for this handler name."),
        ACCOUNT_FILTER,
    )

    @extend_schema(
        operation_id="admin_jobs_list", summary="All jobs, newest first", responses=OperatorJobOut(many=True)
    )
    def get(self, request: Request) -> Response:
        filters = self.parse_filters()
        jobs = job_list(
            account_id=self.account_filter(filters.get("account")),
            status=filters.get("status"),
            queue=filters.get("queue"),
            handler=filters.get("handler"),
        )
        jobs = with_account(jobs)
        return self.paginated(jobs, OperatorJobOut)


class OperatorJobDetailView(OperatorJobView):
    @extend_schema(operation_id="admin_jobs_read", summary="One job", responses=OperatorJobOut)
    def get(self, request: Request, job_id: UUID) -> Response:
        return Response(OperatorJobOut(job_get(job_id=job_id)).data)

    @extend_schema(
        operation_id="admin_jobs_cancel",
        summary="Cancel a job",
        description="Pending or retrying jobs only; any other state answers 409 naming it. Answers the cancelled job.",
        responses={200: OperatorJobOut, **problems(409)},
    )
    def delete(self, request: Request, job_id: UUID) -> Response:
        job_cancel(job_id=job_id)
        return Response(OperatorJobOut(job_get(job_id=job_id)).data)


class OperatorJobRetryView(OperatorJobView):
    @extend_schema(
        operation_id="admin_jobs_retry",
        summary="Retry a job now",
        description="Dead, failed or retrying jobs go back to pending with attempt 0; any other state answers 409.",
        request=None,
        responses={200: OperatorJobOut, **problems(409)},
    )
    def post(self, request: Request, job_id: UUID) -> Response:
        job_retry(job_id=job_id)
        return Response(OperatorJobOut(job_get(job_id=job_id)).data)
