"""Top-level URL map: the admin, and each app's API under /api/v1/."""

from django.contrib import admin
from django.urls import include, path

from jobs.api.metrics import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("config.api.urls")),
    path("metrics", metrics_view, name="metrics"),  # Prometheus; protected, 404 unless configured
    path("", include("integrations.api.urls")),  # public: /unsubscribe/<token>/, /hooks/twilio/sms/
]

# Under /api/ these answer problem documents (RFC 9457); elsewhere Django's own pages.
handler400 = "config.api.problems.handler400"
handler403 = "config.api.problems.handler403"
handler404 = "config.api.problems.handler404"
handler500 = "config.api.problems.handler500"
