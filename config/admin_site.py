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

    # What marketers call the admin's models (the models keep their names; no migration for a label).
    MODEL_LABELS = {
        ("workflows", "WorkflowExecution"): "Runs",
        ("workflows", "WorkflowStep"): "Steps",
        ("workflows", "WorkflowVersion"): "Published versions",
        ("workflows", "ExecutionLog"): "Run log",
    }
    APP_ORDER = ["workflows", "contacts", "jobs", "integrations", "accounts", "auth"]

    def get_app_list(self, request, app_label=None):
        apps = super().get_app_list(request, app_label)
        for app in apps:
            for model in app["models"]:
                model["name"] = self.MODEL_LABELS.get((app["app_label"], model["object_name"]), model["name"])
        rank = {label: index for index, label in enumerate(self.APP_ORDER)}
        return sorted(apps, key=lambda app: rank.get(app["app_label"], len(rank)))

    def get_urls(self):
        from workflows.admin_dashboard import dashboard_view

        return [path("dashboard/", self.admin_view(dashboard_view), name="relay_dashboard"), *super().get_urls()]


class RelayAdminConfig(AdminConfig):
    default_site = "config.admin_site.RelayAdminSite"
