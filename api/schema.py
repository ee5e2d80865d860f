"""OpenAPI glue (drf-spectacular): bearer auth, filters and problem responses documented for every operation.

Views declare only their success responses and any problem particular to
them: `responses={200: JobOut, **problems(409)}`. Every operation then gets
the problems every endpoint can answer (400, 401, 403, 404 with a path
parameter, 413, 415 with a body, 429), as `application/problem+json`.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import force_instance, is_patched_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny

from api.problems import PROBLEM_CONTENT_TYPE
from api.serializers import CHECKED, NOT_BLANK, StrictSerializer

__all__ = ["CHECKED", "ApiAutoSchema", "problems"]


class FieldErrorSerializer(serializers.Serializer):
    field = serializers.CharField(help_text="Path of the bad field, e.g. `steps[2].config.url`; empty: the whole body.")
    message = serializers.CharField()


class ProblemSerializer(serializers.Serializer):
    """RFC 9457 problem details."""

    type = serializers.CharField(help_text="`about:blank` for plain HTTP errors, else `urn:relay:problem:<slug>`.")
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
    # The problem document's `errors` member (RFC 9457 extension); it shadows Serializer.errors on the class.
    errors = FieldErrorSerializer(many=True, required=False, help_text="Validation errors, one per bad field.")  # type: ignore[assignment]
    current_state = serializers.CharField(required=False, help_text="On 409: the state that refused the request.")


def problems(*codes: int) -> dict[tuple[int, str], type[ProblemSerializer]]:
    """Problem responses for extend_schema(responses={...}) beyond the ones every operation gets."""
    return {(code, PROBLEM_CONTENT_TYPE): ProblemSerializer for code in codes}


_BODY_METHODS = {"POST", "PUT", "PATCH"}


class ApiAutoSchema(AutoSchema):
    def _map_serializer(self, serializer, direction, bypass_extensions=False):
        """A StrictSerializer refuses fields it does not know: its request body says so (additionalProperties)
        and adds what its class declares that the fields alone do not say (`schema_required`, `schema_extra`)."""
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        if direction == "request" and isinstance(serializer, StrictSerializer):
            schema["additionalProperties"] = False
            if serializer.schema_required and not is_patched_serializer(serializer, direction):
                schema["required"] = sorted({*schema.get("required", []), *serializer.schema_required})
            schema.update(serializer.schema_extra(patch=is_patched_serializer(serializer, direction)))
        return schema

    def _get_request_for_media_type(self, serializer, direction="request"):
        """A body whose schema needs one of several fields (`anyOf` of `required`) is required: no body is {}."""
        schema, required = super()._get_request_for_media_type(serializer, direction)
        instance = force_instance(serializer)
        if not required and isinstance(instance, StrictSerializer) and self.method != "PATCH":
            required = any("required" in option for option in instance.schema_extra(patch=False).get("anyOf", []))
        return schema, required

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        """A text field that trims and may not be blank refuses white space alone: its schema says so."""
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        trims = isinstance(field, serializers.CharField) and getattr(field, "trim_whitespace", False)
        if direction == "request" and trims and not field.allow_blank and schema and "pattern" not in schema:
            schema["pattern"] = NOT_BLANK
        return schema

    def _requires_auth(self) -> bool:
        return not all(issubclass(p, AllowAny) for p in getattr(self.view, "permission_classes", []))

    def problem_codes(self) -> list[int]:
        codes = [400, 413]
        if self._requires_auth():
            codes += [401, 403, 429]
        if "{" in self.path:
            codes.append(404)
        if self.method in _BODY_METHODS and self.get_request_serializer() is not None:
            codes.append(415)
        return sorted(codes)

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code in self.problem_codes():
            if str(code) not in responses:
                responses[str(code)] = self._get_response_for_code(
                    ProblemSerializer, str(code), media_types=(PROBLEM_CONTENT_TYPE,), direction=direction
                )
        return responses

    def get_override_parameters(self):
        parameters = list(super().get_override_parameters())
        filters = getattr(self.view, "filters", None)
        if filters is not None and self.method == "GET":
            parameters += filters.parameters()
        return parameters


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token from `manage.py create_api_token`: `Authorization: Bearer rly_...`.",
        }


def add_problem_headers(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """Postprocessing hook: document Retry-After on 429 and WWW-Authenticate on 401."""
    headers = {
        "429": {"Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}},
        "401": {"WWW-Authenticate": {"description": 'Always `Bearer realm="api"`.', "schema": {"type": "string"}}},
    }
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            for code, response in operation.get("responses", {}).items():
                if code in headers:
                    response.setdefault("headers", {}).update(headers[code])
    return result
