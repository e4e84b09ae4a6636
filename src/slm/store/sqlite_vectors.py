"""The SQLite store's vector indexes: one per profile and :class:`Source` (the memories'
own vectors in ``embeddings``; their further passages and their standing statements in
``passages``), each following its rows.

An index is built from the rows the first time a profile is searched and then kept in
step: new rows are found by their monotonically increasing key, removed ones through the
``forgotten`` log, other processes' commits through ``PRAGMA data_version``. That
watermark (last key, last forgotten sequence number) is what makes a saved index safe to
reuse: a large profile's graph index is saved next to the database file
(``<file>.index/<profile>.json`` + a data file) with the watermark it reflects, and on
open only the rows after the watermark are applied. A crash at any point leaves either
the previous saved pair or none, never a torn one; an index saved for another database
(another ``store_id``) or another dimension is ignored and rebuilt.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slm.store.base import PASSAGE_SPAN, Vector, best_per_memory
from slm.store.files import data_files
from slm.store.sqlite_conn import Connection
from slm.store.sqlite_dialect import SQLiteDialect
from slm.store.vectors import (
    EXACT_MAX,
    ExactIndex,
    GraphIndex,
    VectorIndex,
    graph_from,
)

_DIALECT = SQLiteDialect()
#: Rows read per statement while building or catching up (bounds memory at open).
_ROWS = 50_000
#: A graph index is saved once this many changes (or a quarter of its size) are unsaved.
SAVE_EVERY = 20_000


@dataclass(frozen=True, slots=True)
class Source:
    """The rows an index follows: those of ``table`` meeting ``condition``, keyed by
    ``key``. One memory owns ``span`` consecutive keys (its key times ``span`` onwards),
    so a forgotten memory's keys are known without reading them."""

    table: str
    condition: str = ""
    span: int = 1
    #: appended to the profile to name the saved index (``#`` is never in a profile)
    suffix: str = ""


MEMORY_VECTORS = Source("embeddings")
PASSAGES = Source("passages", "AND kind = 'passage'", PASSAGE_SPAN, "#passages")
STANDING = Source("passages", "AND kind <> 'passage'", PASSAGE_SPAN, "#standing")


@dataclass
class IndexState:
    index: VectorIndex
    max_key: int = 0
    forgotten_seq: int = 0
    dirty: bool = False
    unsaved: int = 0
    #: ``PRAGMA data_version`` when this index last caught up (others' commits change it)
    data_version: int = -1
    #: memory key -> its keys in the index, ascending (built on demand, reset on change)
    owned: dict[int, list[int]] | None = None


class VectorCache:
    """Per-profile vector indexes of one SQLite store (callers hold the store's lock)."""

    def __init__(
        self,
        conn: Connection,
        folder: Path,
        dim: int,
        store_id: str,
        source: Source = MEMORY_VECTORS,
        version: Callable[[], int] | None = None,
    ) -> None:
        self._conn = conn
        #: other connections' commit count (``PRAGMA data_version``, or the read cache's
        #: pinned one during a recall)
        self._version = version or conn.data_version
        self.folder = folder
        self.dim = dim
        self.store_id = store_id
        self.source = source
        self.states: dict[str, IndexState] = {}

    def mark_dirty(self) -> None:
        """Our own connection committed: every index must look for changes."""
        for state in self.states.values():
            state.dirty = True

    def index(self, profile: str) -> VectorIndex:
        """The profile's index, brought up to date with the rows."""
        state = self.states.get(profile)
        if state is None:
            state = self.states[profile] = self._open(profile)
            self._catch_up(profile, state)
            return state.index
        if self._stale(state):
            self._catch_up(profile, state)
        return state.index

    def _stale(self, state: IndexState) -> bool:
        """Whether rows may have changed since the index last caught up (a commit of ours,
        or of another connection)."""
        return state.dirty or self._version() != state.data_version

    def owned(self, profile: str, memories: Sequence[int]) -> dict[int, Vector]:
        """The vectors each of ``memories`` owns in the profile's index (for a source of
        several keys per memory), in key order; memories owning none are left out."""
        index = self.index(profile)
        state = self.states[profile]
        if state.owned is None:
            grouped: dict[int, list[int]] = {}
            for key in sorted(index.keys()):
                grouped.setdefault(key // self.source.span, []).append(key)
            state.owned = grouped
        found = [(memory, keys) for memory in memories if (keys := state.owned.get(memory))]
        vectors = index.get([key for _, keys in found for key in keys]) if found else None
        if vectors is None:
            return {}
        bounds = np.cumsum([0, *(len(keys) for _, keys in found)])
        return {memory: vectors[bounds[i] : bounds[i + 1]] for i, (memory, _) in enumerate(found)}

    def loaded(self, profile: str) -> VectorIndex | None:
        state = self.states.get(profile)
        return state.index if state is not None else None

    def _open(self, profile: str) -> IndexState:
        name = profile + self.source.suffix
        saved = GraphIndex.load(self.folder, name, lambda m: self._belongs(profile, m))
        if saved is not None:
            graph, manifest = saved
            return IndexState(graph, int(manifest["max_key"]), int(manifest["forgotten_seq"]))
        return IndexState(ExactIndex(self.dim))

    def _belongs(self, profile: str, manifest: dict[str, Any]) -> bool:
        """Whether a saved manifest describes this database's profile at a point it has
        passed: its watermark may not be ahead of the rows (a database restored from an
        older copy under the same identity)."""
        try:
            max_key, forgotten_seq = int(manifest["max_key"]), int(manifest["forgotten_seq"])
            same = (manifest["store_id"], manifest["profile"], int(manifest["dim"]))
        except (KeyError, TypeError, ValueError):
            return False
        if same != (self.store_id, profile, self.dim):
            return False
        last = self._id_of(max_key // self.source.span)
        if last is not None and last != manifest.get("last_id", last):
            return False  # the key now holds another memory: not the rows this was saved from
        (top_key, top_seq) = self._conn.rows(
            "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'memories'), 0), "
            "coalesce((SELECT max(seq) FROM forgotten), 0)"
        )[0]
        return bool(max_key // self.source.span <= top_key and forgotten_seq <= top_seq)

    def _catch_up(self, profile: str, state: IndexState) -> None:
        """Apply rows after the watermark, then removals (in that order, so a row removed
        while we read is still seen in the log)."""
        state.data_version = self._version()
        source = self.source
        while True:
            rows = self._conn.rows(
                f"SELECT key, vector FROM {source.table} WHERE profile = ? {source.condition} "
                "AND key > ? ORDER BY key LIMIT ?",
                (profile, state.max_key, _ROWS),
            )
            if not rows:
                break
            keys = [r[0] for r in rows]
            matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(-1, self.dim)
            state.index.add(keys, matrix)
            state.owned = None
            state.max_key = keys[-1]
            state.unsaved += len(keys)
            if isinstance(state.index, ExactIndex) and len(state.index) > EXACT_MAX:
                state.index = graph_from(state.index)
        gone = self._conn.rows(
            "SELECT seq, key FROM forgotten WHERE profile = ? AND seq > ? ORDER BY seq",
            (profile, state.forgotten_seq),
        )
        if gone:
            span = source.span
            state.index.remove(key * span + i for _, key in gone for i in range(span))
            state.owned = None
            state.forgotten_seq = gone[-1][0]
            state.unsaved += len(gone)
        state.dirty = False
        if isinstance(state.index, GraphIndex) and state.unsaved >= max(
            SAVE_EVERY, len(state.index) // 4
        ):
            self.save(profile, state)

    def _id_of(self, key: int) -> str | None:
        rows = self._conn.rows("SELECT id FROM memories WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def save(self, profile: str, state: IndexState) -> None:
        if not isinstance(state.index, GraphIndex):
            return
        watermark = {
            "store_id": self.store_id,
            "profile": profile,
            "max_key": state.max_key,
            "forgotten_seq": state.forgotten_seq,
            "last_id": self._id_of(state.max_key // self.source.span),
        }
        try:
            state.index.save(self.folder, profile + self.source.suffix, watermark)
            state.unsaved = 0
        except (OSError, RuntimeError):
            # A cache that cannot be saved is rebuilt from the rows next time.
            pass

    def save_all(self) -> None:
        """Save every loaded graph with changes, after applying the rows committed since it
        last caught up: the last batch written before closing would otherwise be left for
        the next open, whose first add then makes faiss copy the whole vector buffer."""
        for profile, state in self.states.items():
            if self._stale(state):
                self._catch_up(profile, state)
            if state.unsaved:
                self.save(profile, state)

    def drop(self, profile: str) -> None:
        """Forget the profile's index, in memory and on disk: the next search builds it
        again from the rows."""
        self.states.pop(profile, None)
        name = profile + self.source.suffix
        for path in [self.folder / f"{name}.json", *data_files(self.folder, name, "faiss")]:
            path.unlink(missing_ok=True)

    def rebuild(self, profile: str) -> int:
        """Drop the profile's index (in memory and on disk) and build it again from the rows."""
        self.drop(profile)
        index = self.index(profile)
        state = self.states[profile]
        if state.unsaved:  # catching up may have saved it already
            self.save(profile, state)
        return len(index)

    def info(self) -> dict[str, Any]:
        return {
            profile: {
                "kind": state.index.kind,
                "vectors": len(state.index),
                "unsaved_changes": state.unsaved,
            }
            for profile, state in self.states.items()
        }


class SQLiteVectors:
    """The SQLite store's :class:`~slm.store.base.Vectors`: an index per profile for the
    memories' vectors, one for their further passages and one for their standing
    statements, each a :class:`VectorCache` following its rows."""

    def __init__(
        self,
        conn: Connection,
        folder: Path,
        dim: int,
        store_id: str,
        version: Callable[[], int] | None = None,
    ) -> None:
        self._conn = conn
        self._lock = conn.lock
        self.dim = dim
        self._own = VectorCache(conn, folder, dim, store_id, MEMORY_VECTORS, version)
        self._passages = VectorCache(conn, folder, dim, store_id, PASSAGES, version)
        self._standing = VectorCache(conn, folder, dim, store_id, STANDING, version)
        self._caches = (self._own, self._passages, self._standing)

    def _rows_in(self, head: str, profile: str, keys: Sequence[int]) -> list[Any]:
        return self._conn.read(lambda db: _DIALECT.rows_in(db, head, [profile], keys))

    def search(
        self,
        profile: str,
        query: Vector,
        k: int,
        allowed: set[int] | None,
        below: int | None = None,
    ) -> list[tuple[int, float]]:
        with self._lock:
            return self._own.index(profile).search(query, k, allowed, below)

    def search_many(self, profile: str, queries: Vector, k: int) -> list[list[tuple[int, float]]]:
        with self._lock:
            return self._own.index(profile).search_many(queries, k)

    def mean(self, profile: str) -> tuple[Vector, int]:
        with self._lock:
            index = self._own.index(profile)
            return index.mean(), len(index)

    def get(self, profile: str, keys: Sequence[int]) -> Vector:
        """From the profile's index when it is loaded and holds them all, else the rows."""
        with self._lock:
            loaded = self._own.loaded(profile)
            cached = loaded.get(list(keys)) if loaded is not None else None
        if cached is not None:
            return cached
        head = "SELECT key, vector FROM embeddings WHERE +profile = ? AND key"
        by_key: dict[int, bytes] = dict(self._rows_in(head, profile, keys))
        out = np.zeros((len(keys), self.dim), dtype=np.float32)
        for row, key in enumerate(keys):
            if key in by_key:
                out[row] = np.frombuffer(by_key[key], dtype="<f4")
        return out

    def passage_search(
        self, profile: str, query: Vector, k: int, allowed: set[int] | None
    ) -> list[tuple[int, float]]:
        with self._lock:
            hits = self._passages.index(profile).search(query, k)
        return best_per_memory(hits, allowed)

    def passages(
        self, profile: str, keys: Sequence[int], standing: bool = False
    ) -> dict[int, Vector]:
        with self._lock:
            return (self._standing if standing else self._passages).owned(profile, keys)

    def standing_search(
        self, profile: str, query: Vector, k: int
    ) -> list[tuple[int, str, str, float]]:
        with self._lock:
            hits = self._standing.index(profile).search(query, k)
        head = "SELECT key, kind, coalesce(text, '') FROM passages WHERE +profile = ? AND key"
        rows = self._rows_in(head, profile, [key for key, _ in hits])
        found = {key: (kind, text) for key, kind, text in rows}
        return [(key // PASSAGE_SPAN, *found[key], cosine) for key, cosine in hits if key in found]

    def rebuild(self, profile: str) -> int:
        """Rebuild the profile's indexes from the rows (``slm reindex``)."""
        with self._lock:
            self._passages.rebuild(profile)
            self._standing.rebuild(profile)
            return self._own.rebuild(profile)

    # -- kept in step with the store ------------------------------------------------------

    def written(self) -> None:
        """Our own connection committed: every index must look for changes."""
        with self._lock:
            for cache in self._caches:
                cache.mark_dirty()

    def rederived(self, profile: str) -> None:
        """The profile's passages were written again: their indexes are built anew when
        next searched."""
        with self._lock:
            self._passages.drop(profile)
            self._standing.drop(profile)

    def info(self) -> dict[str, Any]:
        with self._lock:
            info = self._own.info()
            for name, cache in (("passages", self._passages), ("standing", self._standing)):
                for profile, state in cache.info().items():
                    info.setdefault(profile, {})[name] = state
            return info

    def save_all(self) -> None:
        with self._lock:
            for cache in self._caches:
                cache.save_all()


def new_store_id(db: sqlite3.Connection) -> str:
    """This database's identity (created once), which saved indexes must match."""
    row = db.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
    if row:
        return str(row[0])
    import secrets

    value = secrets.token_hex(16)
    db.execute("INSERT INTO meta (key, value) VALUES ('store_id', ?)", (value,))
    return value
