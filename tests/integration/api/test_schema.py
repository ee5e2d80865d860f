"""The OpenAPI schema is valid and complete, and the docs are served from our own static files."""

import re

import pytest
from django.contrib.staticfiles import finders
from django.core.management import call_command
from drf_spectacular.validation import validate_schema

pytestmark = pytest.mark.django_db

EXPECTED_OPERATIONS = {
    ("get", "/api/v1/contacts"),
    ("post", "/api/v1/contacts"),
    ("get", "/api/v1/contacts/{contact_id}"),
    ("put", "/api/v1/contacts/{contact_id}"),
    ("patch", "/api/v1/contacts/{contact_id}"),
    ("delete", "/api/v1/contacts/{contact_id}"),
    ("post", "/api/v1/contacts/{contact_id}/tags"),
    ("delete", "/api/v1/contacts/{contact_id}/tags/{tag}"),
    ("get", "/api/v1/jobs"),
    ("get", "/api/v1/jobs/{job_id}"),
    ("get", "/api/v1/admin/jobs"),
    ("get", "/api/v1/admin/jobs/stats"),
    ("get", "/api/v1/admin/jobs/{job_id}"),
    ("delete", "/api/v1/admin/jobs/{job_id}"),
    ("post", "/api/v1/admin/jobs/{job_id}/retry"),
    ("get", "/api/v1/workflows"),
    ("post", "/api/v1/workflows"),
    ("get", "/api/v1/workflows/{workflow_id}"),
    ("put", "/api/v1/workflows/{workflow_id}"),
    ("patch", "/api/v1/workflows/{workflow_id}"),
    ("delete", "/api/v1/workflows/{workflow_id}"),
    ("post", "/api/v1/workflows/{workflow_id}/publish"),
    ("post", "/api/v1/workflows/{workflow_id}/pause"),
    ("post", "/api/v1/workflows/{workflow_id}/activate"),
    ("post", "/api/v1/workflows/{workflow_id}/restore"),
    ("get", "/api/v1/workflows/{workflow_id}/executions"),
    ("post", "/api/v1/workflows/{workflow_id}/executions"),
    ("post", "/api/v1/events"),
    ("get", "/api/v1/executions"),
    ("get", "/api/v1/executions/{execution_id}"),
    ("get", "/api/v1/executions/{execution_id}/logs"),
    ("post", "/api/v1/executions/{execution_id}/pause"),
    ("post", "/api/v1/executions/{execution_id}/resume"),
    ("post", "/api/v1/executions/{execution_id}/cancel"),
    ("post", "/api/v1/executions/{execution_id}/retry"),
    ("post", "/api/v1/admin/jobs/retry"),
    ("post", "/api/v1/admin/jobs/cancel"),
    ("post", "/api/v1/executions/pause"),
    ("post", "/api/v1/executions/resume"),
    ("post", "/api/v1/executions/cancel"),
    ("post", "/api/v1/executions/retry"),
    ("get", "/api/v1/schedules"),
    ("post", "/api/v1/schedules"),
    ("get", "/api/v1/schedules/{hook_id}"),
    ("delete", "/api/v1/schedules/{hook_id}"),
    ("post", "/api/v1/schedules/{hook_id}/pause"),
    ("post", "/api/v1/schedules/{hook_id}/resume"),
    ("get", "/api/v1/schedules/{hook_id}/runs"),
}


@pytest.fixture(scope="module")
def served_schema(django_db_blocker) -> dict:
    from rest_framework.test import APIClient

    with django_db_blocker.unblock():
        response = APIClient().get("/api/v1/schema/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi+json")
    return response.json()


def test_spectacular_validates_the_schema_without_a_warning(tmp_path):
    """What CI checks: `manage.py spectacular --validate --fail-on-warn`."""
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert out.read_text().startswith("openapi: 3.")


def test_the_served_schema_is_valid_openapi_3(served_schema):
    assert served_schema["openapi"].startswith("3.")
    validate_schema(served_schema)


def test_the_schema_is_public_but_ignores_credentials(client):
    assert client.get("/api/v1/schema/", HTTP_AUTHORIZATION="Bearer rly_bogus000000000000").status_code == 200


def test_every_endpoint_is_documented(served_schema):
    operations = {(method, path) for path, item in served_schema["paths"].items() for method in item}
    assert operations >= EXPECTED_OPERATIONS


def test_every_operation_needs_the_bearer_token_and_documents_its_problems(served_schema):
    assert served_schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": served_schema["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    for path, item in served_schema["paths"].items():
        for method, operation in item.items():
            assert operation["security"] == [{"bearerAuth": []}], (method, path)
            for code in ("400", "401", "403", "429"):
                assert code in operation["responses"], (method, path, code)
            if "{" in path:
                assert "404" in operation["responses"], (method, path)
            for code, response in operation["responses"].items():
                if code >= "400":
                    assert set(response["content"]) == {"application/problem+json"}, (method, path, code)
            assert "Retry-After" in operation["responses"]["429"]["headers"]


def test_illegal_transitions_are_documented_as_409(served_schema):
    assert "409" in served_schema["paths"]["/api/v1/admin/jobs/{job_id}/retry"]["post"]["responses"]
    assert "409" in served_schema["paths"]["/api/v1/admin/jobs/{job_id}"]["delete"]["responses"]


def test_run_transitions_document_409_and_starts_document_idempotency(served_schema):
    paths = served_schema["paths"]
    for action in ("pause", "resume", "cancel", "retry"):
        assert "409" in paths[f"/api/v1/executions/{{execution_id}}/{action}"]["post"]["responses"], action
    for path in ("/api/v1/workflows/{workflow_id}/executions", "/api/v1/events", "/api/v1/workflows"):
        operation = paths[path]["post"]
        headers = {p["name"] for p in operation["parameters"] if p["in"] == "header"}
        assert headers == {"Idempotency-Key"}, path
        assert "422" in operation["responses"], path
    assert "201" in paths["/api/v1/workflows/{workflow_id}/executions"]["post"]["responses"]
    run_filters = {p["name"]: p for p in paths["/api/v1/executions"]["get"]["parameters"]}
    assert set(run_filters) >= {"status", "workflow", "contact", "created_after", "created_before"}
    assert "waiting" in run_filters["status"]["schema"]["enum"]


def test_no_schema_mentions_a_job_payload(served_schema):
    for name, component in served_schema["components"]["schemas"].items():
        assert "payload" not in component.get("properties", {}), name


def test_filters_are_documented_with_their_allowed_values(served_schema):
    parameters = {p["name"]: p for p in served_schema["paths"]["/api/v1/admin/jobs"]["get"]["parameters"]}
    assert set(parameters) >= {"status", "queue", "handler", "account", "cursor", "page_size"}
    assert "dead" in parameters["status"]["schema"]["enum"]


def test_the_docs_are_served_from_our_static_files_without_a_cdn(client):
    response = client.get("/api/v1/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets, html[:500]
    for asset in assets:
        assert asset.startswith("/static/drf_spectacular_sidecar/"), asset
        assert finders.find(asset.removeprefix("/static/").split("?")[0]), asset
    assert "swagger-ui-bundle.js" in html
    assert not re.search(r"https?://(?!testserver)", html.replace("http://www.w3.org", "")), "external URL in docs"
    assert "/api/v1/schema/" in html
