"""The embedded default store: one SQLite file in WAL mode.

Memories and every derived table live in the same file and change in the same
transaction, so a crash leaves either the whole memory or none of it. What is held in
process beside it (:mod:`slm.index`: the vector indexes, the edge arrays) is saved, when
large, in the folder beside the file (``<file>.index``, :attr:`folder`).

Durability: ``journal_mode=WAL`` with ``synchronous=FULL``, so a write is on disk when
``remember`` returns, even across a power cut (the recall log alone commits without waiting
for the disk: :mod:`slm.store.feedback`). Concurrency: writers in other processes
are waited for with jittered retries (:mod:`slm.store.sqlite_conn`).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from slm.errors import StoreError
from slm.models import NewMemory
from slm.store import fields, schema
from slm.store.base import Cursor, Postings, Vector
from slm.store.files import private_directory, private_file
from slm.store.readcache import ReadCache
from slm.store.relational import Relational
from slm.store.sql import INSERT_COLUMNS, memory_row
from slm.store.sqlite_conn import Connection
from slm.store.sqlite_dialect import SQLiteDialect

T = TypeVar("T")


class SQLiteStore(Relational):
    """SQLite implementation of :class:`~slm.store.base.Store` (what both stores do alike is
    :class:`~slm.store.relational.Relational`)."""

    kind = "sqlite"
    dialect = SQLiteDialect()

    def __init__(self, path: str | Path, *, dim: int) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        self.dim = dim
        try:
            private_directory(self.path.parent)
            private_file(self.path)
            self._conn = Connection(self.path)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open SQLite store at {self.path}: {exc}") from exc
        try:
            self._migrate()
            self.store_id = self.meta("store_id") or self._conn.write(new_store_id)
        except BaseException:
            self._conn.close()
            raise
        self.cache = ReadCache(lambda _: self._conn.data_version())
        self.folder = Path(f"{self.path}.index")
        self._allowed = fields.AllowedKeys()

    @property
    def busy_retries(self) -> int:
        """How many times this store found the file busy and retried (see sqlite_conn)."""
        return self._conn.retries

    # -- plumbing ---------------------------------------------------------------------

    def _migrate(self) -> None:
        """Apply the schema's migrations not applied yet (``PRAGMA user_version`` counts
        those that are)."""
        latest = len(schema.versions(self.dialect, self.dim))
        if self._conn.rows("PRAGMA user_version")[0][0] >= latest:
            return

        def apply(db: sqlite3.Connection) -> None:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            schema.upgrade(db, self.dialect, self.dim, version, "PRAGMA user_version={number}")

        self._conn.write(apply)

    def select(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._conn.rows(sql, params)

    def _read(self, work: Callable[[Cursor], T]) -> T:
        return self._conn.read(work)

    def snapshot(self, work: Callable[[Cursor], T]) -> T:
        return self._conn.snapshot(work)

    def read_vectors(self, sql: str, params: Sequence[Any]) -> tuple[list[int], Vector]:
        rows = self._conn.rows(sql, params)
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4")
        return [r[0] for r in rows], matrix.reshape(len(rows), self.dim)

    def _commit(self, profile: str | None, work: Callable[[Cursor], T], lasting: bool) -> T:
        """Retried whole while the file is busy (one writer at a time: the profile's lock)."""
        return self._conn.write(work, lasting=lasting)

    # -- writes -----------------------------------------------------------------------

    def _insert_memories(
        self, cur: Cursor, profile: str, items: Sequence[NewMemory]
    ) -> list[tuple[str, int]]:
        """One statement for all the rows. AUTOINCREMENT hands out consecutive keys inside
        one write transaction; that is checked on the last row, and the keys read back
        when it does not hold."""
        if not items:
            return []
        ids = self._free_ids(cur, items)
        (last,) = cur.execute(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'memories'), 0),"
            " coalesce((SELECT max(key) FROM memories), 0))"
        ).fetchone()
        cur.executemany(
            f"INSERT INTO memories ({INSERT_COLUMNS}) VALUES ({','.join('?' * 15)})",
            [
                memory_row(profile, id_, m, json.dumps(list(m.tags), ensure_ascii=False))
                for id_, m in zip(ids, items, strict=True)
            ],
        )
        keys = list(range(last + 1, last + 1 + len(items)))
        row = cur.execute("SELECT key FROM memories WHERE id = ?", (ids[-1],)).fetchone()
        if row is None or row[0] != keys[-1]:
            found = dict(
                self.dialect.rows_in(cur, "SELECT id, key FROM memories WHERE id", [], ids)
            )
            keys = [found[id_] for id_ in ids]
        return list(zip(ids, keys, strict=True))

    def _free_ids(self, cur: Cursor, items: Sequence[NewMemory]) -> list[str]:
        """An id per item: the one it asks for when free, else a fresh random one."""
        ids = [item.id or secrets.token_hex(8) for item in items]
        while True:
            rows = self.dialect.rows_in(cur, "SELECT id FROM memories WHERE id", [], ids)
            taken = {row[0] for row in rows}
            seen: set[str] = set()
            clash = False
            for i, id_ in enumerate(ids):
                if id_ in taken or id_ in seen:
                    ids[i] = secrets.token_hex(8)
                    clash = True
                seen.add(ids[i])
            if not clash:
                return ids

    def _insert_vectors(
        self, cur: Cursor, profile: str, fresh: Sequence[tuple[int, NewMemory]]
    ) -> None:
        cur.executemany(
            "INSERT INTO embeddings (key, profile, vector) VALUES (?,?,?)",
            [(key, profile, m.vector) for key, m in fresh],
        )
        cur.executemany(
            "INSERT OR IGNORE INTO memory_tags (profile, tag, key) VALUES (?,?,?)",
            [(profile, tag, key) for key, m in fresh for tag in m.tags],
        )

    def _delete_vectors(self, cur: Cursor, profile: str, keys: Sequence[int]) -> None:
        """Also the memories' tags."""
        cur.executemany("DELETE FROM embeddings WHERE key = ?", [(key,) for key in keys])
        cur.executemany(
            "DELETE FROM memory_tags WHERE profile = ? AND key = ?", [(profile, k) for k in keys]
        )

    # -- reads ------------------------------------------------------------------------

    def _read_postings(self, profile: str, terms: Sequence[str], limit: int) -> dict[str, Postings]:
        """Read in one transaction, so that every term sees the same index."""
        return self._conn.snapshot(lambda db: self.dialect.postings(db, profile, terms, limit))

    # -- lifecycle --------------------------------------------------------------------

    def _health(self) -> dict[str, Any]:
        return {
            "journal_mode": self.select("PRAGMA journal_mode")[0][0],
            "synchronous": "full",
            "busy_retries": self.busy_retries,
        }

    def backup(self, target: Path) -> int:
        """Copy the whole store (every profile) into the new file ``target`` while it stays
        in use; return how many memories the copy holds (see :meth:`Connection.backup`)."""
        try:
            return self._conn.backup(target)
        except OSError as exc:
            raise StoreError(f"cannot back up {self.path} to {target}: {exc}") from exc

    def close(self) -> None:
        self._conn.close()


def new_store_id(db: sqlite3.Connection) -> str:
    """This database's identity (created once), which what is saved beside it must match."""
    row = db.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
    if row:
        return str(row[0])
    value = secrets.token_hex(16)
    db.execute("INSERT INTO meta (key, value) VALUES ('store_id', ?)", (value,))
    return value
