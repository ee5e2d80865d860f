from django.urls import path

from api import converters  # noqa: F401 - registers <api_id:...>
from workflows.api import bulk, scheduled_hooks, views

urlpatterns = [
    path("workflows", views.WorkflowListView.as_view(), name="api-workflow-list"),
    path("workflows/<api_id:workflow_id>", views.WorkflowDetailView.as_view(), name="api-workflow-detail"),
    path("workflows/<api_id:workflow_id>/publish", views.WorkflowPublishView.as_view(), name="api-workflow-publish"),
    path("workflows/<api_id:workflow_id>/pause", views.WorkflowPauseView.as_view(), name="api-workflow-pause"),
    path("workflows/<api_id:workflow_id>/activate", views.WorkflowActivateView.as_view(), name="api-workflow-activate"),
    path("workflows/<api_id:workflow_id>/restore", views.WorkflowRestoreView.as_view(), name="api-workflow-restore"),
    path(
        "workflows/<api_id:workflow_id>/executions",
        views.WorkflowExecutionsView.as_view(),
        name="api-workflow-executions",
    ),
    path("events", views.EventView.as_view(), name="api-events"),
    path("executions", views.ExecutionListView.as_view(), name="api-execution-list"),
    path("executions/pause", bulk.BulkRunsPauseView.as_view(), name="api-executions-bulk-pause"),
    path("executions/resume", bulk.BulkRunsResumeView.as_view(), name="api-executions-bulk-resume"),
    path("executions/cancel", bulk.BulkRunsCancelView.as_view(), name="api-executions-bulk-cancel"),
    path("executions/retry", bulk.BulkRunsRetryView.as_view(), name="api-executions-bulk-retry"),
    path("executions/<uuid:execution_id>", views.ExecutionDetailView.as_view(), name="api-execution-detail"),
    path("executions/<uuid:execution_id>/logs", views.ExecutionLogsView.as_view(), name="api-execution-logs"),
    path("executions/<uuid:execution_id>/pause", views.ExecutionPauseView.as_view(), name="api-execution-pause"),
    path("executions/<uuid:execution_id>/resume", views.ExecutionResumeView.as_view(), name="api-execution-resume"),
    path("executions/<uuid:execution_id>/cancel", views.ExecutionCancelView.as_view(), name="api-execution-cancel"),
    path("executions/<uuid:execution_id>/retry", views.ExecutionRetryView.as_view(), name="api-execution-retry"),
    path("schedules", scheduled_hooks.HookListView.as_view(), name="api-schedule-list"),
    path("schedules/<api_id:hook_id>", scheduled_hooks.HookDetailView.as_view(), name="api-schedule-detail"),
    path("schedules/<api_id:hook_id>/pause", scheduled_hooks.HookPauseView.as_view(), name="api-schedule-pause"),
    path("schedules/<api_id:hook_id>/resume", scheduled_hooks.HookResumeView.as_view(), name="api-schedule-resume"),
    path("schedules/<api_id:hook_id>/runs", scheduled_hooks.HookRunsView.as_view(), name="api-schedule-runs"),
]
