"""A PostgreSQL server of our own, for what must not be done to a shared one: restarting it.

`initdb` in a temporary directory, started with `pg_ctl` on a free port of 127.0.0.1 (trust auth, user
postgres), stopped and removed at the end. Run as the `postgres` user when this process is root (initdb
refuses root). The binaries are found through RELAY_PG_BINDIR, `pg_config --bindir`, or the newest
/usr/lib/postgresql/<version>/bin.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def pg_bindir() -> Path | None:
    candidates = [os.environ.get("RELAY_PG_BINDIR", "")]
    pg_config = shutil.which("pg_config")
    if pg_config:
        candidates.append(subprocess.run([pg_config, "--bindir"], capture_output=True, text=True).stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivateCluster:
    def __init__(self, *, bindir: Path | None = None) -> None:
        found = bindir or pg_bindir()
        if found is None:
            raise RuntimeError("PostgreSQL's initdb and pg_ctl were not found (set RELAY_PG_BINDIR)")
        self.bindir = found
        self.root = Path(tempfile.mkdtemp(prefix="relay-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=check)

    def init(self) -> PrivateCluster:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.root}'\n"
                "fsync = off\nfull_page_writes = off\nmax_connections = 100\n"
            )
        return self

    def configure(self, **settings: str) -> PrivateCluster:
        """Append server settings (`autovacuum="on"`, ...) to postgresql.conf; takes effect at the next start."""
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
        return self

    def start(self) -> float:
        """Start the server; returns the moment (time.time()) it accepts connections."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")
        return self._wait_ready()

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self, *, down_seconds: float = 0.0, mode: str = "fast") -> float:
        """Stop (closing every connection), stay down a while, start again; returns when it was back."""
        self.stop(mode)
        time.sleep(down_seconds)
        return self.start()

    def _wait_ready(self, timeout: float = 30.0) -> float:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return time.time()
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PrivateCluster:
        return self.init()

    def __exit__(self, *exc: object) -> None:
        self.remove()
