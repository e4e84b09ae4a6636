"""The server store: PostgreSQL with pgvector, chosen by a DSN.

The same tables, derived data and BM25 statistics as the SQLite store (see
:mod:`slm.store.schema`), written by the same code (:mod:`slm.store.relational`)
over PostgreSQL's dialect (:mod:`slm.store.postgres_dialect`), so both answer every
:class:`~slm.store.base.Store` call alike. Vectors are stored in pgvector columns and
searched in this process, and edges walked in this process, as SQLite's are: each server
keeps its read cache, and beside the store its indexes (:mod:`slm.index`), current from
the change feed (:mod:`slm.store.feed`), whose head it reads once at the start of each
recall. So several servers share one PostgreSQL, and a write acknowledged by one is seen by
the next recall of every other. Given a ``folder`` (the engine gives
:func:`slm.settings.index_dir`), a server saves its large indexes on its own disk there, under
the database's identity, and a server started later loads them and reads the feed from
where they stand instead of building them from the rows.

Concurrency: connections come from a small pool, one per calling thread. Every write is
one transaction that first takes a per-profile advisory lock, so writers to one profile
are serialised (as SQLite serialises all writers) and writers to different profiles run
in parallel. Every statement filters on the profile.
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import Cursor as PgCursor
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool

from slm.errors import ConfigError, StoreError, disk_full
from slm.models import NewMemory
from slm.store import fields, schema
from slm.store.base import Cursor, Vector
from slm.store.postgres_dialect import PostgresDialect
from slm.store.readcache import ReadCache
from slm.store.relational import Relational
from slm.store.sql import INSERT_COLUMNS, memory_row

log = logging.getLogger(__name__)

#: A database's identity as slm makes it (32 hex digits; a UUID's form is accepted too):
#: it names this database's folder of saved indexes, so nothing else may stand there.
STORE_ID = re.compile(r"[0-9a-f]{32}|[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}")

#: Advisory lock namespace (first of two int4 keys) of the per-profile write locks.
PROFILE_LOCK_SPACE = 0x736C6D
#: Advisory lock key (bigint) held while migrating.
MIGRATION_LOCK = 0x736C6D5F6D6967

T = TypeVar("T")
_INSERT_MEMORY = (
    f"INSERT INTO memories ({INSERT_COLUMNS}) VALUES ({', '.join(['%s'] * 15)}) "
    "ON CONFLICT DO NOTHING RETURNING content_hash, id, key"
)


def redact(dsn: str) -> str:
    """The DSN without its password, for messages and ``health``."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(f"not a valid PostgreSQL DSN: {exc}") from None
    params.pop("password", None)
    return make_conninfo("", **params)


def _schema_version(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT to_regclass('slm_schema') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM slm_schema").fetchone()
    return int(row[0]) if row else 0


class PostgresStore(Relational):
    """PostgreSQL implementation of :class:`~slm.store.base.Store` (what both stores do
    alike is :class:`~slm.store.relational.Relational`)."""

    kind = "postgres"
    dialect = PostgresDialect()

    def __init__(
        self, dsn: str, *, dim: int, pool_size: int = 4, folder: Path | None = None
    ) -> None:
        self.location = redact(dsn)
        self.dim = dim
        self._held = threading.local()  # .conn: the connection this thread's recall holds
        self._allowed = fields.AllowedKeys()
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                self._migrate(conn)
            self._pool = ConnectionPool(
                dsn,
                min_size=1,
                max_size=pool_size,
                kwargs={"autocommit": True},
                configure=register_vector,
                # A connection the server dropped (a restart, a failover) is replaced when
                # next taken, instead of failing the call that took it.
                check=ConnectionPool.check_connection,
                open=False,
            )
            self._pool.open(wait=True, timeout=30.0)
            self.cache = ReadCache(self.feed_head)
            self.store_id = self.meta("store_id") or self._new_store_id()
        except psycopg.Error as exc:
            raise StoreError(f"cannot open PostgreSQL store at {self.location}: {exc}") from exc
        # this server's saved indexes of this database, beside those of any other
        self.folder = self._index_folder(folder)

    # -- plumbing ---------------------------------------------------------------------

    def _index_folder(self, base: Path | None) -> Path | None:
        """Where this server saves its indexes of this database: ``base/<store_id>``; none
        when no folder is given, no identity could be recorded, or the recorded one is not
        an identity slm makes (a value such as ``/etc`` or ``../x`` would name a folder
        outside ``base``): then nothing is saved and every index is built from the rows."""
        if base is None or not self.store_id:
            return None
        if not STORE_ID.fullmatch(self.store_id):
            log.warning(
                "slm: the store_id in slm_meta of %s is not one slm makes (%r): "
                "no index of it is saved or read; every index is built from the rows",
                self.location,
                self.store_id[:80],
            )
            return None
        return base / self.store_id

    def _new_store_id(self) -> str:
        """This database's identity, made by the first server to open it (what a server
        saves of its indexes must match it: :mod:`slm.index.saved`)."""
        made = secrets.token_hex(16)
        insert = "INSERT INTO slm_meta (key, value) VALUES ('store_id', %s) ON CONFLICT DO NOTHING"
        try:
            self.change(None, lambda cur: cur.execute(insert, (made,)))
        except (StoreError, psycopg.Error):
            return ""  # a role that may not write it: this server saves nothing
        return self.meta("store_id") or made

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        """Bring the schema up to date (:mod:`slm.store.schema`; ``slm_schema`` holds the
        numbers applied). Safe when several clients connect at once: the migrations run in
        one transaction under an advisory lock, and the version is read again once it is
        held."""
        if _schema_version(conn) < len(schema.versions(self.dialect, self.dim)):
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute("CREATE TABLE IF NOT EXISTS slm_schema (version integer NOT NULL)")
                applied = _schema_version(conn)
                record = "INSERT INTO slm_schema (version) VALUES ({number})"
                schema.upgrade(conn.cursor(), self.dialect, self.dim, applied, record)
        row = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'embeddings'::regclass "
            "AND attname = 'vector'"
        ).fetchone()
        if row is None or row[0] != self.dim:
            stored = row[0] if row else "unknown"
            raise ConfigError(f"this store holds vectors of dimension {stored}, not {self.dim}")

    @contextmanager
    def _cursor(self) -> Iterator[PgCursor[Any]]:
        try:
            with self._holding() as conn, conn.cursor() as cur:
                yield cur
        except psycopg.Error as exc:
            raise StoreError(f"read failed on {self.location}: {exc}") from exc

    @contextmanager
    def _holding(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection this thread holds, else one taken from the pool for the block,
        held by the thread meanwhile: taking it checks it with a round trip, so a
        connection the server dropped (a restart) is replaced before the first statement,
        once per call instead of once per statement."""
        held: psycopg.Connection[Any] | None = getattr(self._held, "conn", None)
        if held is not None:
            yield held
            return
        with self._pool.connection() as conn:
            self._held.conn = conn
            try:
                yield conn
            finally:
                self._held.conn = None

    def reading(self, profile: str) -> AbstractContextManager[None]:
        """One recall's reads, on one connection of the pool held for them, the feed's
        head read once."""
        return self._pinned(profile, "read")

    def writing(self, profile: str) -> AbstractContextManager[None]:
        """One write's statements, the reads that prepare it and its transaction, on one
        connection of the pool held for them, the feed's head read once for the reads."""
        return self._pinned(profile, "write")

    @contextmanager
    def _pinned(self, profile: str, what: str) -> Iterator[None]:
        """A block on one held connection with ``profile``'s read cache pinned; a database
        error in it is a :class:`StoreError` saying the ``what`` failed."""
        try:
            with self._holding(), self.cache.pinned(profile):
                yield
        except psycopg.Error as exc:
            raise StoreError(f"{what} failed on {self.location}: {exc}") from exc

    @contextmanager
    def _write(self, profile: str | None, lasting: bool = True) -> Iterator[PgCursor[Any]]:
        """One transaction; with a profile, holding that profile's write lock; not
        ``lasting``, committed without waiting for the disk (``synchronous_commit``) and
        sent as one pipeline (the recall log's writes read nothing back: one round trip)."""
        try:
            with (
                self._holding() as conn,
                nullcontext() if lasting else conn.pipeline(),
                conn.transaction(),
                conn.cursor() as cur,
            ):
                if not lasting:
                    cur.execute("SET LOCAL synchronous_commit TO OFF")
                if profile is not None:
                    cur.execute(
                        "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                        (PROFILE_LOCK_SPACE, profile),
                    )
                yield cur
        except psycopg.errors.DiskFull as exc:
            raise StoreError(disk_full(self.location)) from exc
        except psycopg.Error as exc:
            raise StoreError(f"write failed on {self.location}: {exc}") from exc

    def _rows(self, sql: str, params: Sequence[Any] = (), binary: bool = False) -> list[Any]:
        with self._cursor() as cur:
            cur.execute(sql, params, binary=binary)
            return cur.fetchall()

    def select(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._rows(sql, params)

    def _read(self, work: Callable[[Cursor], T]) -> T:
        with self._cursor() as cur:
            return work(cur)

    def snapshot(self, work: Callable[[Cursor], T]) -> T:
        with self._cursor() as cur, cur.connection.transaction():
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return work(cur)

    def read_vectors(self, sql: str, params: Sequence[Any]) -> tuple[list[int], Vector]:
        rows = self._rows(sql, params, binary=True)
        matrix = np.zeros((len(rows), self.dim), dtype=np.float32)
        for i, (_, vector) in enumerate(rows):
            matrix[i] = vector.to_numpy()
        return [int(row[0]) for row in rows], matrix

    def _commit(self, profile: str | None, work: Callable[[Cursor], T], lasting: bool) -> T:
        with self._write(profile, lasting) as cur:
            result = work(cur)
        # the read cache's version is the feed head, which this write moved
        if profile is not None and (seq := self.recorder.last()) is not None:
            self.cache.advance(profile, seq)
        return result

    # -- writes -----------------------------------------------------------------------

    def _insert_memories(
        self, cur: Cursor, profile: str, items: Sequence[NewMemory]
    ) -> list[tuple[str, int]]:
        """A wanted id already taken (in another profile) is replaced by a fresh one; so is
        one taken meanwhile by a concurrent writer, whose memory then comes after the others."""
        pg = cast(PgCursor[Any], cur)
        pending = list(items)
        ids = {m.content_hash: m.id or secrets.token_hex(8) for m in pending}
        rows = pg.execute("SELECT id FROM memories WHERE id = ANY(%s)", (list(ids.values()),))
        taken = {row[0] for row in rows.fetchall()}
        ids = {h: secrets.token_hex(8) if i in taken else i for h, i in ids.items()}
        out: dict[str, tuple[str, int]] = {}
        for _ in range(8):
            if not pending:
                return [out[m.content_hash] for m in items]
            pg.executemany(
                _INSERT_MEMORY,
                [memory_row(profile, ids[m.content_hash], m, list(m.tags)) for m in pending],
                returning=True,
            )
            for result in pg.results():
                for content_hash, id_, key in result.fetchall():
                    out[content_hash] = (id_, key)
            pending = [m for m in pending if m.content_hash not in out]
            ids.update((m.content_hash, secrets.token_hex(8)) for m in pending)
        raise StoreError(f"could not find free ids for {len(pending)} memories")

    def _insert_vectors(
        self, cur: Cursor, profile: str, fresh: Sequence[tuple[int, NewMemory]]
    ) -> None:
        cur.executemany(
            "INSERT INTO embeddings (key, profile, vector) VALUES (%s, %s, %s)",
            [(key, profile, np.frombuffer(m.vector, dtype="<f4")) for key, m in fresh],
        )

    def _delete_vectors(self, cur: Cursor, profile: str, keys: Sequence[int]) -> None:
        cur.execute(
            "DELETE FROM embeddings WHERE profile = %s AND key = ANY(%s)", (profile, list(keys))
        )

    # -- lifecycle --------------------------------------------------------------------

    def _health(self) -> dict[str, Any]:
        version, pgvector = self._rows(
            "SELECT current_setting('server_version'), "
            "(SELECT extversion FROM pg_extension WHERE extname = 'vector')"
        )[0]
        stats = self._pool.get_stats()
        return {
            "server_version": version,
            "pgvector": pgvector,
            "pool": {"size": stats.get("pool_size", 0), "max": self._pool.max_size},
        }

    def close(self) -> None:
        self._pool.close()
