"""The Idempotency-Key header on POSTs that create (workflows, runs, events).

    def post(self, request, workflow_id):
        return idempotent(self, lambda: self._start(request, workflow_id))

Without the header the request simply runs. With it, the first successful
answer is remembered for the caller's account (the `idempotency` app) and a
retry with the same key and the same request (method, path and canonical
JSON body) gets it back - same status, same bytes, plus
`Idempotent-Replayed: true` - without doing anything again. The same key with
another request is 422. A refusal (400, 404, 409, 429...) is not remembered:
nothing was done, so the client may fix the cause and retry with the same key.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from api.problems import InvalidInput, Unprocessable
from idempotency.application.services import remember
from idempotency.domain.keys import MAX_KEY_LENGTH, Answer, InvalidKey, KeyReused, check_key, fingerprint

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
KEPT_HEADERS = ("Location",)

IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    HEADER,
    # idempotency.domain.keys.check_key: printable ASCII, 1 to 200 characters, not only spaces.
    {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH, "pattern": "^[ -~]*[!-~][ -~]*$"},
    OpenApiParameter.HEADER,
    required=False,
    description="Optional; a UUID is a good key. A retry with the same key and the same body gets the first "
    "answer back (same status and body, header `Idempotent-Replayed: true`) and does nothing again; the same key "
    "with another body is 422. Successful answers are remembered for API_IDEMPOTENCY_KEY_TTL_HOURS (24 h); "
    "refusals are not.",
)


def idempotent(view, produce: Callable[[], Response]) -> HttpResponse:
    """`produce()`'s response, or the one remembered for the request's Idempotency-Key. `view` is an AccountView."""
    request = view.request
    raw = request.headers.get(HEADER)
    if raw is None:
        return produce()
    try:
        key = check_key(raw)
    except InvalidKey as exc:
        raise InvalidInput.field(HEADER, str(exc)) from None
    request_fingerprint = fingerprint(method=request.method, path=request.path, body=request.data)

    def answer() -> Answer:
        response = produce()
        return Answer(
            status=response.status_code,
            body=JSONRenderer().render(response.data).decode("utf-8"),
            headers={name: response[name] for name in KEPT_HEADERS if response.has_header(name)},
        )

    try:
        remembered = remember(account_id=view.account_id, key=key, fingerprint=request_fingerprint, produce=answer)
    except KeyReused:
        raise Unprocessable(
            f"This {HEADER} was already used with a different request (another body or endpoint); "
            "use a new key for a new request."
        ) from None
    response = HttpResponse(remembered.answer.body, status=remembered.answer.status, content_type="application/json")
    for name, value in remembered.answer.headers.items():
        response[name] = value
    if remembered.replayed:
        response[REPLAYED_HEADER] = "true"
    return response
