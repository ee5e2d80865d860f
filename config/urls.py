"""Top-level URL map: the admin, and each app's API under /api/v1/."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("integrations.api.urls")),  # public: /unsubscribe/<token>/, /hooks/twilio/sms/
]
