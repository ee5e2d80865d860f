"""The webhook client: Standard Webhooks signatures, the SSRF guard, bounded answers, classified failures.

One call, one attempt (the queue retries):
  1. check the request (method, URL, headers, JSON body): a bad one is a ValidationFailure naming the field;
  2. vet the target (integrations.domain.ssrf): resolve once, refuse non-public addresses unless
     WEBHOOK_ALLOWED_HOSTS names the host, and pick the address to use;
  3. sign (webhook-id, webhook-timestamp, webhook-signature) with the account's `whsec_` secret(s);
  4. send through an adapter that connects to the vetted address only, while Host, TLS SNI and the
     certificate check still use the host name, so a second DNS answer cannot redirect the connection;
  5. read at most WEBHOOK_MAX_RESPONSE_BYTES of the answer, never follow a redirect, and classify it.

Settings are read on every call, so tests (pytest-django's `settings`) and worker
processes (their environment) configure it without rebuilding anything.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3
from django.conf import settings
from requests.adapters import HTTPAdapter

from integrations.domain.channels import (
    WebhookRequest,
    WebhookResponse,
    attach_failure_details,
    header_value_problem,
)
from integrations.domain.failures import failure_for_status, is_success, retry_after_from_headers
from integrations.domain.redaction import excerpt, redact, request_secrets
from integrations.domain.signing import HEADERS as SIGNATURE_HEADERS
from integrations.domain.signing import new_message_id, signature_headers
from integrations.domain.ssrf import AllowList, Resolver, TargetRefused, VettedTarget, normalize_host, vet_target
from kernel.failures import (
    JobError,
    NetworkFailure,
    TimeoutFailure,
    ValidationFailure,
    format_error,
    redact_urls,
)

log = logging.getLogger("relay.integrations.webhooks")

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"})
MAX_URL_LENGTH = 2048
# Headers Relay sets itself: a step may not override how the request is framed or signed.
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", *SIGNATURE_HEADERS})
# Answer headers worth keeping in the step's response data (nothing that may carry a credential).
KEPT_RESPONSE_HEADERS = ("content-type", "content-length", "retry-after", "location")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # RFC 9110 header name
_READ_CHUNK = 16 * 1024
# What the HTTP stack may raise past the classification in `_exchange`.
_TRANSPORT_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError, OSError, UnicodeError, ValueError)

SigningSecrets = Callable[[int], list[str]]


@dataclass(frozen=True)
class WebhookSettings:
    connect_timeout: float = 5.0
    read_timeout: float = 15.0
    max_response_bytes: int = 64 * 1024
    kept_body_chars: int = 4096
    allowed_hosts: AllowList = field(default_factory=AllowList)
    retry_after_max: float = 3600.0
    ca_bundle: str | None = None
    user_agent: str = "Relay-Webhooks/1.0"

    @classmethod
    def from_settings(cls) -> WebhookSettings:
        return cls(
            connect_timeout=float(getattr(settings, "WEBHOOK_CONNECT_TIMEOUT", 5.0)),
            read_timeout=float(getattr(settings, "WEBHOOK_READ_TIMEOUT", 15.0)),
            max_response_bytes=int(getattr(settings, "WEBHOOK_MAX_RESPONSE_BYTES", 64 * 1024)),
            kept_body_chars=int(getattr(settings, "WEBHOOK_RESPONSE_BODY_CHARS", 4096)),
            allowed_hosts=AllowList.parse(getattr(settings, "WEBHOOK_ALLOWED_HOSTS", None)),
            retry_after_max=float(getattr(settings, "WEBHOOK_RETRY_AFTER_MAX_SECONDS", 3600.0)),
            ca_bundle=getattr(settings, "WEBHOOK_CA_BUNDLE", None) or None,
            user_agent=str(getattr(settings, "WEBHOOK_USER_AGENT", "Relay-Webhooks/1.0")),
        )


def system_resolve(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host` (all of them are vetted)."""
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise NetworkFailure(f"could not resolve {host}") from None
    seen: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in answers:
        address = str(sockaddr[0])
        if address not in seen:
            seen.append(address)
    return seen


class PinnedAddressAdapter(HTTPAdapter):
    """A requests transport that connects to one vetted address, whatever DNS says by then.

    urllib3 is told to open the socket to `target.address`; TLS still sends the
    host name as SNI and checks the certificate against it, and the Host header
    names it, so the receiver sees an ordinary request. A request for any other
    host is refused, so nothing but the vetted target can use this adapter.
    """

    def __init__(self, target: VettedTarget) -> None:
        self.target = target
        super().__init__(pool_connections=1, pool_maxsize=1, max_retries=0)

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: Any, cert: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        scheme = host_params["scheme"]
        port = host_params["port"] or (443 if scheme == "https" else 80)
        if normalize_host(host_params["host"] or "") != self.target.host or port != self.target.port:
            raise ValueError("the request is not for the vetted webhook target")
        host_params["host"] = self.target.address
        host_params["port"] = port
        if scheme == "https":
            pool_kwargs["server_hostname"] = self.target.host
            pool_kwargs["assert_hostname"] = self.target.host
        return host_params, pool_kwargs

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}


class _Exchange:
    """One request and its answer, bounded as a whole: `deadline` is on the monotonic clock."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.connection: Any = None  # the urllib3 connection carrying it, once the pool hands one out
        self.expired = False

    def expire(self) -> None:
        self.expired = True
        sock = getattr(self.connection, "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed: nothing left to end
                sock.shutdown(socket.SHUT_RDWR)  # the blocked read returns at once, and the pool drops it


class _Deadlines:
    """Ends exchanges that outlive their overall deadline.

    urllib3's read timeout bounds each socket read, so a receiver that trickles its headers or body a
    byte at a time would hold a worker thread for as long as it likes. One daemon thread per process
    looks at the exchanges in flight every TICK seconds and shuts down the socket of an expired one.
    """

    TICK = 0.1

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watched: dict[int, _Exchange] = {}
        self._thread: threading.Thread | None = None
        self._current = threading.local()

    def begin(self, deadline: float) -> _Exchange:
        exchange = _Exchange(deadline)
        with self._lock:
            self._watched[id(exchange)] = exchange
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._watch, name="webhook-deadlines", daemon=True)
                self._thread.start()
        self._current.exchange = exchange
        return exchange

    def end(self, exchange: _Exchange) -> None:
        self._current.exchange = None
        with self._lock:
            self._watched.pop(id(exchange), None)

    def connection_taken(self, connection: Any) -> None:
        exchange = getattr(self._current, "exchange", None)
        if exchange is not None:
            exchange.connection = connection

    def _watch(self) -> None:
        while True:
            time.sleep(self.TICK)
            now = time.monotonic()
            with self._lock:  # under the lock: `end` cannot hand the connection to the next request meanwhile
                for exchange in self._watched.values():
                    if exchange.deadline <= now and not exchange.expired:
                        exchange.expire()


_deadlines = _Deadlines()


class _WatchedHTTPPool(urllib3.HTTPConnectionPool):
    def _get_conn(self, timeout: float | None = None) -> Any:
        connection = super()._get_conn(timeout)
        _deadlines.connection_taken(connection)
        return connection


class _WatchedHTTPSPool(urllib3.HTTPSConnectionPool):
    def _get_conn(self, timeout: float | None = None) -> Any:
        connection = super()._get_conn(timeout)
        _deadlines.connection_taken(connection)
        return connection


@functools.lru_cache(maxsize=4096)
def _normalized(url: str) -> tuple[str, Any, int | None]:
    """The URL as requests will send it (IDNA host, quoted path), split; the same URLs come back every step."""
    prepared_url = requests.Request("GET", url).prepare().url or ""
    parts = urlsplit(prepared_url)
    return prepared_url, parts, parts.port


class _SessionCache(threading.local):
    """Each thread keeps a session per vetted target (address, host, port), so consecutive webhooks to one
    receiver reuse a kept-alive connection instead of opening one each time. A session only ever
    connects to the address its target was vetted for; a different answer from DNS is a different key."""

    MAX_SESSIONS = 32
    MAX_IDLE_SECONDS = 30.0

    def __init__(self) -> None:
        self.sessions: dict[tuple, tuple[requests.Session, float]] = {}

    def get(self, target: VettedTarget, verify: Any) -> tuple[requests.Session, bool]:
        key = (target.address, target.host, target.port, verify)
        now = time.monotonic()
        found = self.sessions.pop(key, None)
        if found is not None and now - found[1] <= self.MAX_IDLE_SECONDS:
            self.sessions[key] = (found[0], now)
            return found[0], True
        if found is not None:
            found[0].close()
        session = requests.Session()
        session.trust_env = False  # no proxy, no .netrc: the connection goes where the guard said
        adapter = PinnedAddressAdapter(target)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        self.sessions[key] = (session, now)
        while len(self.sessions) > self.MAX_SESSIONS:  # the least recently used goes
            oldest = next(iter(self.sessions))
            self.sessions.pop(oldest)[0].close()
        return session, False

    def drop(self, target: VettedTarget, verify: Any) -> None:
        found = self.sessions.pop((target.address, target.host, target.port, verify), None)
        if found is not None:
            found[0].close()


_sessions = _SessionCache()


@dataclass(frozen=True)
class _Outgoing:
    method: str
    url: str
    origin: str  # scheme://host[:port], what logs and errors may name
    host_header: str
    scheme: str
    host: str
    port: int
    headers: dict[str, str]
    body: bytes | None


class RequestsWebhookClient:
    """The WebhookClient Relay uses (see the module docstring). Build it with `webhook_client()`."""

    def __init__(
        self,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        *,
        signing_secrets: SigningSecrets | None = None,
        resolver: Resolver | None = None,
        clock: Callable[[], float] = time.time,
        config: WebhookSettings | None = None,
    ) -> None:
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._signing_secrets = signing_secrets
        self._resolve = resolver or system_resolve
        self._clock = clock
        self._config = config

    def settings(self) -> WebhookSettings:
        config = self._config or WebhookSettings.from_settings()
        overrides: dict[str, Any] = {}
        if self._connect_timeout is not None:
            overrides["connect_timeout"] = self._connect_timeout
        if self._read_timeout is not None:
            overrides["read_timeout"] = self._read_timeout
        if overrides:
            config = replace(config, **overrides)
        return config

    def send(self, request: WebhookRequest) -> WebhookResponse:
        config = self.settings()
        message_id = request.message_id or new_message_id()
        started = time.monotonic()
        origin = "webhook"
        refused: str | None = None
        try:
            outgoing = self._prepare(request, message_id, config)
            origin = outgoing.origin
            try:
                target = self._vet(outgoing, config)
            except TargetRefused as exc:
                refused = str(exc)
                raise ValidationFailure(f"webhook target refused: {refused}") from None
            outgoing = self._sign(outgoing, request.account_id, message_id)
            response = self._exchange(outgoing, target, config, started, message_id, request)
        except (JobError, *_TRANSPORT_ERRORS) as exc:
            # A transport exception's message may quote a header value or the URL (the HTTP library writes
            # them in): it becomes a classified error naming only its type. Anything else (a database error
            # reading the signing secret, a bug) propagates as it is, with its traceback.
            who = "webhook" if origin == "webhook" else f"webhook {origin}"
            error = exc if isinstance(exc, JobError) else NetworkFailure(f"{who}: failed ({type(exc).__name__})")
            if getattr(error, "response_data", None) is None:
                details: dict[str, Any] = {
                    "status_code": None,
                    "duration_ms": round((time.monotonic() - started) * 1000, 1),
                    "webhook_id": message_id,
                }
                if refused is not None:  # nothing was sent: the guard's reason (host and address, never the path)
                    details["refused"] = refused
                attach_failure_details(error, details, None)
            log.warning(
                "webhook %s %s failed after %.0f ms: %s (webhook-id %s)",
                request.method.upper() if isinstance(request.method, str) else "?",
                origin,
                (time.monotonic() - started) * 1000,
                format_error(error),
                message_id,
            )
            if error is exc:
                raise
            raise error from None
        log.info(
            "webhook %s %s answered %d in %.0f ms (webhook-id %s)",
            outgoing.method,
            origin,
            response.status_code,
            response.duration_ms,
            message_id,
        )
        return response

    # --- 1. the request ---------------------------------------------------------------

    def _prepare(self, request: WebhookRequest, message_id: str, config: WebhookSettings) -> _Outgoing:
        method = request.method.upper() if isinstance(request.method, str) else ""
        if method not in METHODS:
            raise ValidationFailure(f"method: must be one of {', '.join(sorted(METHODS))}")
        url = request.url
        if not isinstance(url, str) or not url.strip():
            raise ValidationFailure("url: must not be empty")
        url = url.strip()
        if len(url) > MAX_URL_LENGTH:
            raise ValidationFailure(f"url: longer than {MAX_URL_LENGTH} characters")
        if any(ch in url for ch in "\r\n\t\x00 "):
            raise ValidationFailure("url: must not contain spaces or control characters")
        try:
            prepared_url, parts, port = _normalized(url)
        except (requests.RequestException, ValueError, UnicodeError):
            raise ValidationFailure("url: not a valid http(s) URL") from None
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise ValidationFailure("url: the scheme must be http or https")
        if not parts.hostname:
            raise ValidationFailure("url: has no host")
        port = port or (443 if scheme == "https" else 80)
        host_header = parts.netloc.rpartition("@")[2]
        headers = self._headers(request.headers, config)
        body: bytes | None = None
        if request.body is not None:
            try:
                body = json.dumps(request.body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
            except (TypeError, ValueError) as exc:
                raise ValidationFailure(f"body: not JSON-serializable ({type(exc).__name__})") from None
            if not any(name.lower() == "content-type" for name in headers):
                headers["Content-Type"] = "application/json"
        return _Outgoing(
            method=method,
            url=prepared_url,
            origin=f"{scheme}://{host_header}",
            host_header=host_header,
            scheme=scheme,
            host=normalize_host(parts.hostname),
            port=port,
            headers=headers,
            body=body,
        )

    @staticmethod
    def _headers(given: Any, config: WebhookSettings) -> dict[str, str]:
        if given is None:
            given = {}
        if not isinstance(given, dict):
            raise ValidationFailure("headers: must be an object of names to values")
        headers = {"User-Agent": config.user_agent, "Accept": "*/*", "Accept-Encoding": "identity"}
        for name, value in given.items():
            if not isinstance(name, str) or not _TOKEN.match(name):
                raise ValidationFailure("headers: a header name must be a token (letters, digits, - and the like)")
            if name.lower() in RESERVED_HEADERS:
                raise ValidationFailure(f"headers: {name} is set by Relay and cannot be given")
            if not isinstance(value, str):
                raise ValidationFailure(f"headers: the value of {name} must be a string")
            problem = header_value_problem(value)
            if problem:
                raise ValidationFailure(f"headers: the value of {name} {problem}")
            headers = {k: v for k, v in headers.items() if k.lower() != name.lower()}
            headers[name] = value
        return headers

    # --- 2. the target ----------------------------------------------------------------

    def _vet(self, outgoing: _Outgoing, config: WebhookSettings) -> VettedTarget:
        """The address to connect to; TargetRefused (`send` makes it a permanent ValidationFailure whose
        response data says `refused`, so a caller can tell "not sent" from "sent and failed")."""
        return vet_target(outgoing.host, outgoing.port, allow_list=config.allowed_hosts, resolve=self._resolve)

    # --- 3. the signature -------------------------------------------------------------

    def _sign(self, outgoing: _Outgoing, account_id: int | None, message_id: str) -> _Outgoing:
        secrets: list[str] = []
        if account_id is not None and self._signing_secrets is not None:
            try:
                secrets = self._signing_secrets(account_id)
            except LookupError:
                raise ValidationFailure(f"account_id: no account {account_id}") from None
        signed = signature_headers(
            secrets, message_id=message_id, timestamp=int(self._clock()), body=outgoing.body or b""
        )
        return replace(outgoing, headers={**outgoing.headers, **signed})

    # --- 4 and 5. the exchange ----------------------------------------------------------

    def _exchange(
        self,
        outgoing: _Outgoing,
        target: VettedTarget,
        config: WebhookSettings,
        started: float,
        message_id: str,
        request: WebhookRequest,
    ) -> WebhookResponse:
        who = f"webhook {outgoing.origin}"
        verify = config.ca_bundle or True
        session, reused = _sessions.get(target, verify)
        exchange = _deadlines.begin(time.monotonic() + config.connect_timeout + config.read_timeout)
        try:
            try:
                prepared = requests.Request(
                    outgoing.method, outgoing.url, headers=outgoing.headers, data=outgoing.body
                ).prepare()
            except (requests.RequestException, ValueError, UnicodeError) as exc:
                # Its message would quote the offending value, perhaps a credential; the type is enough.
                raise ValidationFailure(f"{who}: the request cannot be sent ({type(exc).__name__})") from None
            prepared.headers["Host"] = outgoing.host_header
            timeout = (config.connect_timeout, config.read_timeout)
            try:
                try:
                    answer = session.send(
                        prepared, stream=True, timeout=timeout, allow_redirects=False, verify=verify, proxies={}
                    )
                except requests.ConnectionError:
                    if not reused or exchange.expired:
                        raise
                    # The receiver closed a kept-alive connection as we reused it: once more, on a new one.
                    _sessions.drop(target, verify)
                    session, reused = _sessions.get(target, verify)
                    answer = session.send(
                        prepared, stream=True, timeout=timeout, allow_redirects=False, verify=verify, proxies={}
                    )
            except requests.RequestException as exc:
                raise _send_failure(exc, who, config, expired=exchange.expired) from None
            try:
                raw, truncated = _read_capped(answer, config, who, exchange)
            finally:
                answer.close()
        except BaseException:
            _sessions.drop(target, verify)  # whatever state its connection is in, do not reuse it
            raise
        finally:
            _deadlines.end(exchange)

        duration_ms = (time.monotonic() - started) * 1000
        secrets = [
            *request_secrets(
                outgoing.url,
                request.headers if isinstance(request.headers, dict) else {},
                body=request.body,
                marked=request.secret_names,
            ),
            *(v for k, v in outgoing.headers.items() if k.lower() == "webhook-signature"),
        ]
        text = raw.decode(_codec(answer.encoding), errors="replace") if raw else ""
        # What is shown is the redacted copy; the answer itself (`text`) is handed back for later steps only.
        kept, cut = excerpt(redact(text, secrets=secrets), config.kept_body_chars)
        headers = {
            name: redact_urls(answer.headers[name]) if name == "location" else answer.headers[name]
            for name in KEPT_RESPONSE_HEADERS
            if name in answer.headers
        }
        response = WebhookResponse(
            status_code=answer.status_code,
            duration_ms=duration_ms,
            body=kept,
            headers=headers,
            body_truncated=truncated or cut,
            body_bytes=len(raw),
            message_id=message_id,
            text=text,
            text_truncated=truncated,
        )
        if is_success(answer.status_code):
            return response
        error = failure_for_status(
            answer.status_code,
            who=who,
            retry_after=retry_after_from_headers(answer.headers, cap=config.retry_after_max),
        )
        attach_failure_details(error, response.as_response_data(), response)
        raise error


def _codec(charset: str | None) -> str:
    """The answer's charset if Python knows it, else UTF-8: the receiver names it, and may name anything."""
    try:
        return codecs.lookup(charset or "utf-8").name
    except (LookupError, TypeError):
        return "utf-8"


def _send_failure(exc: requests.RequestException, who: str, config: WebhookSettings, *, expired: bool) -> JobError:
    """The classified error for a request that got no answer; never the exception's text (it may quote the URL)."""
    if expired:
        return TimeoutFailure(f"{who}: {_too_slow(config)}")
    if isinstance(exc, requests.ConnectTimeout):
        return TimeoutFailure(f"{who}: no connection within {config.connect_timeout:g} s")
    if isinstance(exc, requests.ReadTimeout):
        return TimeoutFailure(f"{who}: no answer within {config.read_timeout:g} s")
    if isinstance(exc, requests.exceptions.SSLError):
        return NetworkFailure(f"{who}: TLS {_tls_problem(exc)}")
    if isinstance(exc, requests.ConnectionError):
        return NetworkFailure(f"{who}: {_connection_problem(exc)}")
    return NetworkFailure(f"{who}: request failed ({type(exc).__name__})")


def _too_slow(config: WebhookSettings) -> str:
    return f"the answer took longer than {config.connect_timeout + config.read_timeout:g} s in all"


def _read_capped(
    answer: requests.Response, config: WebhookSettings, who: str, exchange: _Exchange
) -> tuple[bytes, bool]:
    """At most `max_response_bytes` of the body, within the exchange's deadline; and whether there was more."""
    cap = config.max_response_bytes
    chunks: list[bytes] = []
    total = 0
    try:
        while total <= cap:
            if exchange.expired or time.monotonic() > exchange.deadline:
                raise TimeoutFailure(f"{who}: {_too_slow(config)}")
            chunk = answer.raw.read(min(_READ_CHUNK, cap + 1 - total), decode_content=True)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except urllib3.exceptions.ReadTimeoutError:
        raise TimeoutFailure(f"{who}: the answer stalled for {config.read_timeout:g} s") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        if exchange.expired:
            raise TimeoutFailure(f"{who}: {_too_slow(config)}") from None
        raise NetworkFailure(f"{who}: the answer was cut off ({type(exc).__name__})") from None
    data = b"".join(chunks)
    return data[:cap], len(data) > cap


def _tls_problem(exc: Exception) -> str:
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text or "doesn't match" in text or "mismatch" in text.lower():
        return "certificate verification failed"
    return "handshake failed"


def _connection_problem(exc: Exception) -> str:
    text = str(exc).lower()
    if "refused" in text:
        return "connection refused"
    if "reset" in text:
        return "connection reset"
    if "remotedisconnected" in text or "aborted" in text or "closed" in text:
        return "connection closed without an answer"
    return "connection failed"
