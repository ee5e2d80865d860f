"""/api/: version 1 of the REST API. Mounted by config/urls.py with one line.

Each app in API_APPS that has an `api/urls.py` is included at /api/v1/,
so a new app's endpoints need only that file (workflows' is picked up as
soon as it exists). Anything under /api/ that no endpoint answers gets a
404 problem document, in DEBUG too.
"""

from importlib.util import find_spec

from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerView

from api.problems import api_not_found

# integrations is not here: its api/urls.py holds public non-API pages (unsubscribe, provider hooks),
# mounted at the site root by config/urls.py.
API_APPS = ("accounts", "contacts", "jobs", "workflows")


def _app_urls() -> list:
    return [path("", include(f"{app}.api.urls")) for app in API_APPS if find_spec(f"{app}.api.urls") is not None]


v1 = [
    *_app_urls(),
    path("schema/", SpectacularJSONAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]

urlpatterns = [
    path("v1/", include(v1)),
    re_path(r"", csrf_exempt(api_not_found)),
]
