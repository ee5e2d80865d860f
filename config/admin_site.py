"""Relay's admin site: Django's, named Relay, with the operators' dashboard at /admin/dashboard/."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.urls import path


class RelayAdminSite(admin.AdminSite):
    site_header = "Relay"
    site_title = "Relay"
    index_title = "Workflows, contacts and runs"
    site_url = None  # Relay has no public site: no "View site" link

    def get_urls(self):
        from workflows.admin_dashboard import dashboard_view

        return [path("dashboard/", self.admin_view(dashboard_view), name="relay_dashboard"), *super().get_urls()]


class RelayAdminConfig(AdminConfig):
    default_site = "config.admin_site.RelayAdminSite"
