"""Real servers on loopback for the integrations tests: an HTTP sink scripted per path, a fake
Twilio-compatible provider, an SMTP server (aiosmtpd) and a TCP listener that never answers.

Each binds 127.0.0.1 port 0, runs in daemon threads and records what it received.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage as ParsedEmail
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from aiosmtpd.smtp import SMTP

BIG_BODY_BYTES = 50 * 1024


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    form: dict[str, list[str]] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        for key, value in self.headers.items():
            if key.lower() == name.lower():
                return value
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request, client_address) -> None:
        """A client that stopped reading (a timeout, a capped body) is expected here; anything else is shown."""
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class _Server6(_Server):
    address_family = socket.AF_INET6


class _LoopbackHttpServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self.requests: list[RecordedRequest] = []
        self.release = threading.Event()  # lets hanging handlers go at teardown
        self._lock = threading.Lock()
        self.host = host
        server_class = _Server6 if ":" in host else _Server
        self.httpd = server_class((host, 0), self._handler_class())
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def url(self, path: str = "/") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):  # keep test output quiet
                pass

            def _dispatch(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                recorded = RecordedRequest(self.command, parts.path, parts.query, dict(self.headers.items()), body)
                if self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
                    recorded.form = parse_qs(body.decode(), keep_blank_values=True)
                server.record(recorded)
                server.answer(self, recorded)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch

            def reply(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                headers = {"Content-Type": "application/json", **(headers or {})}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

        return Handler

    def answer(self, handler, request: RecordedRequest) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class HttpSink(_LoopbackHttpServer):
    """Answers by path:

    /ok 200 · /flaky/<n>/<key> 503 n times then 200 · /limited/seconds 429 Retry-After: 7 ·
    /limited/date 429 Retry-After as an HTTP date 30 s ahead · /status/<code> that status ·
    /redirect 302 · /hang waits (past any short read timeout) · /big a 50 KB body ·
    /echo 200 and /echo/<code> that status, both echoing the request back ·
    /unavailable/retry-after 503 Retry-After: 9 · /charset/unknown 200 in a charset no one knows ·
    /malformed-header 500 with a header line lacking its colon ·
    /trickle/headers and /trickle/body send their answer a byte every 0.2 s (each read is quick, the whole is not).
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__(host)
        self.counters: dict[str, int] = defaultdict(int)

    def answer(self, handler, request: RecordedRequest) -> None:
        path = request.path
        if path == "/ok":
            handler.reply(200, b'{"ok": true}')
        elif path.startswith("/flaky/"):
            _, _, failures, _key = path.split("/", 3)
            self.counters[path] += 1
            if self.counters[path] <= int(failures):
                handler.reply(503, b'{"error": "unavailable"}')
            else:
                handler.reply(200, b'{"ok": true}')
        elif path == "/limited/seconds":
            handler.reply(429, b'{"error": "slow down"}', {"Retry-After": "7"})
        elif path == "/limited/date":
            handler.reply(429, b'{"error": "slow down"}', {"Retry-After": formatdate(time.time() + 30, usegmt=True)})
        elif path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            handler.reply(code, f'{{"status": {code}}}'.encode())
        elif path == "/redirect":
            handler.reply(302, b"", {"Location": "http://127.0.0.1:9/elsewhere?sig=moved-secret-abc"})
        elif path == "/hang":
            self.release.wait(10)
            handler.reply(200, b'{"late": true}')
        elif path == "/big":
            handler.reply(200, b"x" * BIG_BODY_BYTES, {"Content-Type": "text/plain"})
        elif path == "/charset/unknown":
            handler.reply(200, b'{"ok": true}', {"Content-Type": "application/json; charset=x-no-such-charset"})
        elif path == "/unavailable/retry-after":
            handler.reply(503, b'{"error": "maintenance"}', {"Retry-After": "9"})
        elif path == "/malformed-header":
            handler.wfile.write(b"HTTP/1.1 500 Oops\r\nContent-Length: 2\r\nthis line has no colon\r\n\r\n{}")
        elif path in ("/trickle/headers", "/trickle/body"):
            body = b'{"slow": true}' + b" " * 400
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
            if path == "/trickle/headers":
                quick, slow = b"", head + b"X-Padding: " + b"p" * 400 + b"\r\n\r\n" + body
            else:
                quick, slow = head + b"\r\n", body
            try:
                handler.wfile.write(quick)
                for index in range(len(slow)):
                    if self.release.wait(0.2):
                        return
                    handler.wfile.write(slow[index : index + 1])
                    handler.wfile.flush()
            except OSError:  # the client gave up, as it should
                return
        elif path == "/echo" or path.startswith("/echo/"):
            code = int(path.split("/")[2]) if path.startswith("/echo/") else 200
            echo = {
                "path": request.path,
                "query": request.query,
                "headers": request.headers,
                "body": request.body.decode(errors="replace"),
            }
            handler.reply(code, json.dumps(echo).encode())
        else:
            handler.reply(404, b'{"error": "no such path"}')


class FakeTwilio(_LoopbackHttpServer):
    """A Twilio-compatible REST API: Messages.json and Calls.json, basic auth, scripted by the To number.

    +15550000429: 429 with Retry-After 9 · +15550000500: 500 · +15550000400: 400 with Twilio error 21211 ·
    +15550000999: hangs · anything else: 201 with a new SM/CA sid.

    A request with an `Idempotency-Key` it has answered before gets that answer again and creates nothing (as
    a Twilio-compatible provider that honours the header does; Twilio's own API documents no such header).
    """

    account_sid = "AC" + "1" * 32
    auth_token = "fake-twilio-auth-token-5f2c"

    def __init__(self, host: str = "127.0.0.1") -> None:
        super().__init__(host)
        self.answered: dict[str, bytes] = {}  # Idempotency-Key -> the 201 answer it got
        self.created: list[str] = []  # the sids of the messages and calls created, in order

    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def answer(self, handler, request: RecordedRequest) -> None:
        expected = "Basic " + base64.b64encode(f"{self.account_sid}:{self.auth_token}".encode()).decode()
        if request.header("Authorization") != expected:
            handler.reply(401, json.dumps({"code": 20003, "message": "Authenticate", "status": 401}).encode())
            return
        prefix = f"/2010-04-01/Accounts/{self.account_sid}/"
        if request.method != "POST" or not request.path.startswith(prefix):
            handler.reply(404, json.dumps({"code": 20404, "message": "Not found", "status": 404}).encode())
            return
        resource = request.path[len(prefix) :]
        to = (request.form.get("To") or [""])[0]
        if to == "+15550000429":
            handler.reply(429, json.dumps({"code": 20429, "status": 429}).encode(), {"Retry-After": "9"})
        elif to == "+15550000500":
            handler.reply(500, b'{"status": 500}')
        elif to == "+15550000400":
            body = {"code": 21211, "message": f"The 'To' number {to} is not a valid phone number.", "status": 400}
            handler.reply(400, json.dumps(body).encode())
        elif to == "+15550000999":
            self.release.wait(10)
            handler.reply(201, b"{}")
        elif resource in ("Messages.json", "Calls.json"):
            key = request.header("Idempotency-Key")
            with self._lock:
                if key and key in self.answered:
                    handler.reply(201, self.answered[key])
                    return
                sid = ("SM" if resource == "Messages.json" else "CA") + uuid.uuid4().hex
                created = {"sid": sid, "status": "queued", "to": to, "from": request.form.get("From", [""])[0]}
                if resource == "Messages.json":
                    created["num_segments"] = "1"
                reply = json.dumps(created).encode()
                self.created.append(sid)
                if key:
                    self.answered[key] = reply
            handler.reply(201, reply)
        else:
            handler.reply(404, b"{}")


class SmtpServer:
    """aiosmtpd in this process: records each accepted message; some recipients are refused.

    unknown@...: 550 at RCPT · busy@...: 451 at RCPT · reject-data@...: 554 at DATA.
    """

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    def start(self):
        self._thread.start()
        create = self.loop.create_server(lambda: SMTP(_SmtpHandler(self), hostname="relay-test"), "127.0.0.1", 0)
        self.server = asyncio.run_coroutine_threadsafe(create, self.loop).result(10)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def close() -> None:
            assert self.server is not None
            self.server.close()
            sessions = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in sessions:
                task.cancel()
            await asyncio.gather(*sessions, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def parsed(self, index: int = -1) -> ParsedEmail:
        return message_from_bytes(self.messages[index][2], policy=policy.default)

    def mailers_setting(self, timeout: float = 5.0) -> dict:
        return {
            "default": {
                "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
                "OPTIONS": {"host": "127.0.0.1", "port": self.port, "timeout": timeout},
            }
        }


class _SmtpHandler:
    def __init__(self, server: SmtpServer) -> None:
        self.server = server

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.startswith("unknown@"):
            return "550 5.1.1 No such user here"
        if address.startswith("busy@"):
            return "451 4.3.0 Mailbox busy, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if any(r.startswith("reject-data@") for r in envelope.rcpt_tos):
            return "554 5.7.1 Message rejected as spam"
        self.server.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 Message accepted for delivery"


class SilentListener:
    """Accepts TCP connections and never says a word (an SMTP server that hangs before its greeting)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]

    def stop(self) -> None:
        self.sock.close()


def closed_port() -> int:
    """A loopback port nobody listens on (connections to it are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
