"""Rate limit per API token: API_THROTTLE_RATE (e.g. "600/min") each, answered 429 with Retry-After.

Counts live in Django's default cache: per process with the default local
memory cache, shared across processes when CACHE_URL points at a shared
cache (e.g. `dbcache://relay_cache` after `createcachetable`).
"""

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

from accounts.domain.tokens import ApiCaller


class TokenRateThrottle(SimpleRateThrottle):
    scope = "token"

    def get_rate(self) -> str | None:
        # Read on every request (not frozen at import like DRF's THROTTLE_RATES), so settings overrides apply.
        return settings.API_THROTTLE_RATE or None

    def get_cache_key(self, request, view) -> str | None:
        caller = request.auth
        if not isinstance(caller, ApiCaller):
            return None  # unauthenticated requests never get this far; the schema and docs are not throttled
        # Keyed by the token's random prefix and id: ids alone can be reused by a database that was rolled back.
        return f"relay-api-throttle:{caller.token_prefix}:{caller.token_id}"
