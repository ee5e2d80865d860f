"""Top-level URL map: the admin, the REST API under /api/ (the api app composes /api/v1/), the public pages."""

from django.contrib import admin
from django.urls import include, path

from jobs.public.api import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("api.urls")),
    path("metrics", metrics_view, name="metrics"),  # Prometheus; protected, 404 unless configured
    path("", include("integrations.api.urls")),  # public: /unsubscribe/<token>/, /hooks/twilio/sms/
]

# Under /api/ these answer problem documents (RFC 9457); elsewhere Django's own pages.
handler400 = "api.problems.handler400"
handler403 = "api.problems.handler403"
handler404 = "api.problems.handler404"
handler500 = "api.problems.handler500"
