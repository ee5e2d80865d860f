from django.urls import path

from jobs.api import bulk, views

urlpatterns = [
    path("jobs", views.AccountJobListView.as_view(), name="api-job-list"),
    path("jobs/<uuid:job_id>", views.AccountJobDetailView.as_view(), name="api-job-detail"),
    path("admin/jobs", views.OperatorJobListView.as_view(), name="api-admin-job-list"),
    path("admin/jobs/stats", views.OperatorJobStatsView.as_view(), name="api-admin-job-stats"),
    path("admin/jobs/retry", bulk.OperatorJobsBulkRetryView.as_view(), name="api-admin-jobs-bulk-retry"),
    path("admin/jobs/cancel", bulk.OperatorJobsBulkCancelView.as_view(), name="api-admin-jobs-bulk-cancel"),
    path("admin/jobs/<uuid:job_id>", views.OperatorJobDetailView.as_view(), name="api-admin-job-detail"),
    path("admin/jobs/<uuid:job_id>/retry", views.OperatorJobRetryView.as_view(), name="api-admin-job-retry"),
]
