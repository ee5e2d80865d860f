"""The project's URLs plus endpoints that fail, to see how failures are answered."""

from django.http import HttpRequest
from django.urls import path
from rest_framework.request import Request

from api.views import AccountView
from config.urls import handler400, handler403, handler404, handler500
from config.urls import urlpatterns as project_urls


class FailingView(AccountView):
    def get(self, request: Request):
        raise RuntimeError("database password is hunter2")


def failing_django_view(request: HttpRequest):
    raise RuntimeError("database password is hunter2")


def failing_database_view(request: HttpRequest):
    """A statement PostgreSQL refuses: its error's DETAIL and CONTEXT quote the data sent."""
    from django.db import connection

    row = request.GET.get("row", '{"card": "4111-1111-SECRET", "n": Infinity}')  # not on the traceback's line
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::jsonb", [row])


urlpatterns = [
    path("api/v1/test-failure", FailingView.as_view()),
    path("api/v1/test-django-failure", failing_django_view),
    path("api/v1/test-database-failure", failing_database_view),
    path("test-database-failure", failing_database_view),
    *project_urls,
]

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]
