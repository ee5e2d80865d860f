"""GET /metrics: the Prometheus text exposition, for a scraper (not part of the JSON API under /api/).

Protected by METRICS_TOKEN (a bearer token) and/or METRICS_ALLOWED_IPS (client addresses or networks); each
one set must hold. With neither set the endpoint does not exist (404): an installation opts in. The view only
reads stored numbers; the counts behind the gauges are made by a worker (jobs.application.metrics).
"""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from jobs.application import metrics


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """METRICS_ALLOWED_IPS as networks (a bare address is a network of one); a bad entry raises ValueError."""
    return [
        ipaddress.ip_network(entry.strip(), strict=False) for entry in settings.METRICS_ALLOWED_IPS if entry.strip()
    ]


def _address_allowed(address: str | None) -> bool:
    try:
        client = ipaddress.ip_address((address or "").split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(client, ipaddress.IPv6Address) and client.ipv4_mapped:
        client = client.ipv4_mapped
    return any(client.version == net.version and client in net for net in allowed_networks())


def _token_given(request: HttpRequest) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    expected = settings.METRICS_TOKEN
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected.encode())


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not settings.METRICS_TOKEN and not settings.METRICS_ALLOWED_IPS:
        raise Http404("metrics are not enabled")
    if settings.METRICS_ALLOWED_IPS and not _address_allowed(request.META.get("REMOTE_ADDR")):
        return HttpResponse("this address may not read the metrics\n", status=403, content_type="text/plain")
    if settings.METRICS_TOKEN and not _token_given(request):
        response = HttpResponse("a valid bearer token is required\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body = metrics.render(gauges_on=float(settings.JOB_METRICS_INTERVAL) > 0)
    response = HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response
