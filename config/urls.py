"""Top-level URL map: the admin, and each app's API under /api/v1/."""

from django.contrib import admin
from django.urls import path

urlpatterns = [
    path("admin/", admin.site.urls),
]
