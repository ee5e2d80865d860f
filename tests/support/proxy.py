"""A TCP relay on loopback in front of PostgreSQL that can leave some connections half-open.

A half-open connection is what a NAT box or a load balancer that forgot a connection leaves behind: the
client's socket stays open and its writes are accepted, but nothing reaches the server and nothing comes
back. `freeze(marker)` does that to every connection whose startup packet holds `marker` (libpq sends the
`application_name` there in plain text when SSL and GSS encryption are off), and leaves the others relayed.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit, urlunsplit


class FreezingProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._frozen: set[bytes] = set()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.seen: list[bytes] = []  # the startup packet of each connection relayed, for a test to check
        self._closed = False

    @classmethod
    def before(cls, database_url: str) -> tuple[FreezingProxy, str]:
        """A started proxy in front of the server `database_url` names, and the URL that goes through it."""
        parts = urlsplit(database_url)
        proxy = cls(parts.hostname or "127.0.0.1", parts.port or 5432).start()
        auth = parts.netloc.rpartition("@")[0]
        netloc = f"{auth}@127.0.0.1:{proxy.port}" if auth else f"127.0.0.1:{proxy.port}"
        query = "sslmode=disable&gssencmode=disable"  # the startup packet in plain text
        return proxy, urlunsplit((parts.scheme, netloc, parts.path, query, ""))

    def start(self) -> FreezingProxy:
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()
        return self

    def freeze(self, marker: bytes) -> None:
        with self._lock:
            self._frozen.add(marker)

    def connections_with(self, marker: bytes) -> int:
        with self._lock:
            return sum(1 for packet in self.seen if marker in packet)

    def stop(self) -> None:
        with self._lock:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        _end(self._server, *sockets)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._closed:  # stopped while this one was being accepted
                    client.close()
                    server.close()
                    return
                self._sockets += [client, server]
            startup: list[bytes] = []
            threading.Thread(target=self._pump, args=(client, server, startup, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, startup, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, startup: list[bytes], from_client: bool) -> None:
        """Relay one direction; once the connection is frozen, read and drop (so the sender never notices)."""
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if from_client and not startup:
                    startup.append(data)
                    with self._lock:
                        self.seen.append(data)
                if startup and self._is_frozen(startup[0]):
                    continue
                target.sendall(data)
        except OSError:
            pass
        finally:
            _end(source, target)

    def _is_frozen(self, packet: bytes) -> bool:
        with self._lock:
            return any(marker in packet for marker in self._frozen)


def _end(*sockets: socket.socket) -> None:
    """Shut down, then close: a bare close() of a socket another thread is blocked reading defers the close
    until that read returns, so neither end would ever hear of it."""
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()
