"""A minimal webhook client on requests. The integrations issue replaces it with the
signed, SSRF-guarded client; this one already classifies answers the queue's way."""

import time

import requests

from integrations.domain.channels import WebhookRequest, WebhookResponse
from jobs.domain.errors import (
    AuthFailure,
    NetworkFailure,
    RateLimited,
    ServerFailure,
    TimeoutFailure,
    ValidationFailure,
)

MAX_BODY = 64 * 1024


class RequestsWebhookClient:
    def __init__(self, connect_timeout: float = 5.0, read_timeout: float = 15.0) -> None:
        self.timeout = (connect_timeout, read_timeout)

    def send(self, request: WebhookRequest) -> WebhookResponse:
        started = time.monotonic()
        try:
            response = requests.request(
                request.method,
                request.url,
                json=request.body,
                headers=request.headers,
                timeout=self.timeout,
                allow_redirects=False,
            )
        except requests.Timeout as exc:
            raise TimeoutFailure(f"webhook timed out: {type(exc).__name__}") from None
        except requests.RequestException as exc:
            raise NetworkFailure(f"webhook connection failed: {type(exc).__name__}") from None
        duration_ms = (time.monotonic() - started) * 1000
        status = response.status_code
        if 200 <= status < 300:
            return WebhookResponse(status, duration_ms, response.text[:MAX_BODY])
        if status == 429:
            retry_after = response.headers.get("Retry-After")
            raise RateLimited(
                f"webhook answered {status}",
                retry_after=float(retry_after) if retry_after and retry_after.isdigit() else None,
            )
        if status in (401, 403):
            raise AuthFailure(f"webhook answered {status}")
        if status == 408 or status >= 500:
            raise ServerFailure(f"webhook answered {status}")
        raise ValidationFailure(f"webhook answered {status}")
