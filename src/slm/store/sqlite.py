"""The embedded default store: one SQLite file in WAL mode.

Memories and every derived table live in the same file and change in the same
transaction, so a crash leaves either the whole memory or none of it. Vectors are also
held in an in-process index per profile (exact, or an HNSW graph for large profiles,
saved beside the file with a watermark) that follows the rows: see
:mod:`slm.store.sqlite_vectors`.

Durability: ``journal_mode=WAL`` with ``synchronous=FULL``, so a write is on disk when
``remember`` returns, even across a power cut. Concurrency: writers in other processes
are waited for with jittered retries (:mod:`slm.store.sqlite_conn`).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from slm.errors import StoreError
from slm.models import NewMemory
from slm.store import fields, lifecycle, sql
from slm.store import sqlite_graph as graph
from slm.store import sqlite_passages as passage_rows
from slm.store import sqlite_rows as memory_rows
from slm.store.base import (
    PASSAGE_SPAN,
    Filters,
    LexicalStats,
    Postings,
    Stored,
    Vector,
    best_per_memory,
)
from slm.store.files import private_directory, private_file
from slm.store.lifecycle import Cursor
from slm.store.relational import Relational
from slm.store.sqlite_conn import CHUNK, Connection, chunks, marks
from slm.store.sqlite_schema import AFTER_MIGRATION, MIGRATIONS
from slm.store.sqlite_vectors import PASSAGES, STANDING, VectorCache, new_store_id

T = TypeVar("T")


def _tag_clauses(profile: str, tags: Sequence[str]) -> list[tuple[str, list[Any]]]:
    return [
        ("key IN (SELECT key FROM memory_tags WHERE profile = ? AND tag = ?)", [profile, tag])
        for tag in tags
    ]


class SQLiteStore(Relational):
    """SQLite implementation of :class:`~slm.store.base.Store` (what both stores do alike is
    :class:`~slm.store.relational.Relational`)."""

    kind = "sqlite"
    mark = "?"
    by_key = "+"
    meta_table = "meta"
    chunk = CHUNK

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
            store_id = self.meta("store_id") or self._conn.write(new_store_id)
        except BaseException:
            self._conn.close()
            raise
        self._lock = self._conn.lock
        folder = Path(f"{self.path}.index")
        self._vectors = VectorCache(self._conn, folder, dim, store_id)
        self._passages = VectorCache(self._conn, folder, dim, store_id, PASSAGES)
        self._standing = VectorCache(self._conn, folder, dim, store_id, STANDING)
        self._caches = (self._vectors, self._passages, self._standing)
        self._allowed = fields.AllowedKeys()

    @property
    def busy_retries(self) -> int:
        """How many times this store found the file busy and retried (see sqlite_conn)."""
        return self._conn.retries

    # -- plumbing ---------------------------------------------------------------------

    def _migrate(self) -> None:
        if self._conn.rows("PRAGMA user_version")[0][0] >= len(MIGRATIONS):
            return

        def apply(db: sqlite3.Connection) -> None:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for number in range(version, len(MIGRATIONS)):
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        db.execute(statement)
                AFTER_MIGRATION.get(number, lambda db, mark: None)(db, "?")
                db.execute(f"PRAGMA user_version={number + 1}")

        self._conn.write(apply)

    def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one write transaction (retried whole while the file is busy)."""
        result = self._conn.write(work)
        with self._lock:
            for cache in self._caches:
                cache.mark_dirty()
        return result

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.rows(sql, params)

    def _select(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._conn.rows(sql, params)

    def _change(self, profile: str | None, work: Callable[[Cursor], T]) -> T:
        return self._write(work)

    @staticmethod
    def _tags(value: Any) -> tuple[str, ...]:
        return tuple(json.loads(value))

    # -- writes -----------------------------------------------------------------------

    def insert(
        self, profile: str, items: Sequence[NewMemory], *, supersede_updates: bool = False
    ) -> list[Stored]:
        def work(db: sqlite3.Connection) -> list[Stored]:
            results: list[Stored] = []
            known: dict[str, tuple[str, int]] = {}
            for chunk in chunks(list(dict.fromkeys(i.content_hash for i in items))):
                rows = db.execute(
                    f"SELECT content_hash, id, key FROM memories WHERE profile = ? "
                    f"AND content_hash IN ({marks(len(chunk))})",
                    [profile, *chunk],
                ).fetchall()
                known.update({h: (i, k) for h, i, k in rows})
            pending: dict[str, NewMemory] = {}
            for item in items:
                if item.content_hash not in known:
                    pending.setdefault(item.content_hash, item)
            new = list(pending.values())
            ids = memory_rows.new_ids(db, new)
            keys = memory_rows.insert_rows(db, profile, ids, new)
            fresh = list(zip(keys, new, strict=True))
            for key, item, id_ in zip(keys, new, ids, strict=True):
                known[item.content_hash] = (id_, key)
            for item, id_ in zip(new, ids, strict=True):
                lifecycle.supersede(db, "?", profile, id_, item.supersedes, lifecycle.start(item))
            created = {item.content_hash for item in new}
            for item in items:
                id_, key = known[item.content_hash]
                results.append(Stored(id_, key, created=item.content_hash in created))
                created.discard(item.content_hash)
            self._insert_derived(db, profile, fresh)
            fields.insert(db, "?", profile, fresh)
            lifecycle.insert_facts(db, "?", profile, fresh, supersede_updates)
            return results

        return self._write(work)

    def _insert_derived(
        self,
        db: sqlite3.Connection,
        profile: str,
        fresh: Sequence[tuple[int, NewMemory]],
        rederive: bool = False,
    ) -> None:
        if not fresh:
            return
        passage_rows.insert_passages(db, profile, fresh)
        if not rederive:
            db.executemany(
                "INSERT INTO embeddings (key, profile, vector) VALUES (?,?,?)",
                [(key, profile, m.vector) for key, m in fresh],
            )
            db.executemany(
                "INSERT OR IGNORE INTO memory_tags (profile, tag, key) VALUES (?,?,?)",
                [(profile, tag, key) for key, m in fresh for tag in m.tags],
            )
        db.executemany(
            "INSERT INTO lex_docs (key, profile, terms) VALUES (?,?,?)",
            [(key, profile, " ".join(m.terms)) for key, m in fresh],
        )
        postings: list[tuple[str, str, int, int, int]] = []
        df, total = Counter[str](), 0
        for key, m in fresh:
            counts = Counter(m.terms)
            total += len(m.terms)
            df.update(counts.keys())
            postings.extend((profile, t, key, tf, len(m.terms)) for t, tf in counts.items())
        db.executemany(
            "INSERT INTO lex_postings (profile, term, key, tf, dl) VALUES (?,?,?,?,?)", postings
        )
        db.executemany(
            "INSERT INTO lex_terms (profile, term, df) VALUES (?,?,?) "
            "ON CONFLICT (profile, term) DO UPDATE SET df = df + excluded.df",
            [(profile, t, n) for t, n in df.items()],
        )
        db.execute(
            "INSERT INTO lex_stats (profile, n_docs, total_len) VALUES (?,?,?) "
            "ON CONFLICT (profile) DO UPDATE SET n_docs = n_docs + excluded.n_docs, "
            "total_len = total_len + excluded.total_len",
            (profile, len(fresh), total),
        )
        graph.insert_graph(db, profile, fresh)

    def delete(self, profile: str, ids: Sequence[str]) -> list[str]:
        def work(db: sqlite3.Connection) -> list[str]:
            removed: list[str] = []
            for chunk in chunks(list(ids)):
                rows = db.execute(
                    f"SELECT m.key, m.id, d.terms FROM memories m LEFT JOIN lex_docs d USING (key) "
                    f"WHERE +m.profile = ? AND m.id IN ({marks(len(chunk))})",
                    [profile, *chunk],
                ).fetchall()
                for key, id_, terms in rows:
                    self._delete_one(db, profile, key, terms.split() if terms is not None else None)
                    removed.append(id_)
            return removed

        return self._write(work)

    def _delete_one(
        self, db: sqlite3.Connection, profile: str, key: int, terms: list[str] | None
    ) -> None:
        self._delete_derived(db, profile, key, terms)
        passage_rows.delete_passages(db, key)
        db.execute("DELETE FROM embeddings WHERE key = ?", (key,))
        db.execute("DELETE FROM memory_tags WHERE profile = ? AND key = ?", (profile, key))
        lifecycle.delete_facts(db, "?", profile, key)
        fields.delete(db, "?", key)
        id_ = db.execute("SELECT id FROM memories WHERE key = ?", (key,)).fetchone()[0]
        db.execute("DELETE FROM memories WHERE key = ?", (key,))
        lifecycle.reinstate(db, "?", profile, id_)
        db.execute("INSERT INTO forgotten (profile, key) VALUES (?, ?)", (profile, key))

    def _delete_derived(
        self,
        db: sqlite3.Connection,
        profile: str,
        key: int,
        terms: list[str] | None,
        relink: bool = True,
    ) -> None:
        """Lexical and graph rows of one memory (not its vector, tags or row); ``terms`` None
        means it has no lexical rows."""
        graph.delete_graph(db, profile, key, relink)
        if terms is None:
            return
        distinct = list(dict.fromkeys(terms))
        counts = Counter(terms)
        db.executemany(
            "DELETE FROM lex_postings WHERE profile = ? AND term = ? AND tf = ? AND dl = ? "
            "AND key = ?",
            [(profile, t, counts[t], len(terms), key) for t in distinct],
        )
        db.executemany(
            "UPDATE lex_terms SET df = df - 1 WHERE profile = ? AND term = ?",
            [(profile, t) for t in distinct],
        )
        db.executemany(
            "DELETE FROM lex_terms WHERE profile = ? AND term = ? AND df <= 0",
            [(profile, t) for t in distinct],
        )
        db.execute(
            "UPDATE lex_stats SET n_docs = n_docs - 1, total_len = total_len - ? WHERE profile = ?",
            (len(terms), profile),
        )
        db.execute("DELETE FROM lex_docs WHERE key = ?", (key,))

    def rederive(self, profile: str, items: Sequence[tuple[int, NewMemory]]) -> None:
        """Replace the lexical, graph and passage rows of stored memories (``slm reindex``)
        in one transaction. Embeddings and tags are kept: they never need recomputing. The
        passage indexes are dropped, to be built again from the rows when next searched.
        """

        def work(db: sqlite3.Connection) -> None:
            for key, _ in items:
                row = db.execute("SELECT terms FROM lex_docs WHERE key = ?", (key,)).fetchone()
                self._delete_derived(db, profile, key, row[0].split() if row else None, False)
                passage_rows.delete_passages(db, key)
                lifecycle.delete_facts(db, "?", profile, key, relinked=False)
            self._insert_derived(db, profile, list(items), rederive=True)
            lifecycle.insert_facts(db, "?", profile, list(items))

        self._write(work)
        with self._lock:
            self._passages.drop(profile)
            self._standing.drop(profile)

    # -- reads ------------------------------------------------------------------------

    def _where(self, profile: str, filters: Filters) -> tuple[str, list[Any]]:
        # With a tag, the tag index leads; "+profile" keeps SQLite from scanning the profile.
        column = "+profile" if filters.tags or filters.metadata else "profile"
        return sql.memory_filter(profile, filters, "?", _tag_clauses, column)

    def postings(self, profile: str, terms: Sequence[str], limit: int) -> dict[str, Postings]:
        def read(db: sqlite3.Connection) -> dict[str, Postings]:
            out: dict[str, Postings] = {}
            for term in dict.fromkeys(terms):
                rows = db.execute(
                    "SELECT key, tf, dl FROM lex_postings WHERE profile = ? AND term = ? "
                    "ORDER BY tf DESC, dl, key LIMIT ?",
                    (profile, term, limit),
                ).fetchall()
                if rows:
                    out[term] = Postings.of(rows)
            return out

        return self._conn.snapshot(read)

    def doc_terms(self, profile: str, keys: Sequence[int]) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for chunk in chunks(list(keys)):
            rows = self._read(
                f"SELECT key, terms FROM lex_docs WHERE +profile = ? "
                f"AND key IN ({marks(len(chunk))})",
                [profile, *chunk],
            )
            out.update((key, terms.split()) for key, terms in rows)
        return out

    def lexical_stats(self, profile: str, terms: Sequence[str]) -> LexicalStats:
        rows = self._read("SELECT n_docs, total_len FROM lex_stats WHERE profile = ?", (profile,))
        n_docs, total = rows[0] if rows else (0, 0)
        df: dict[str, int] = {}
        for chunk in chunks(list(dict.fromkeys(terms))):
            df.update(
                self._read(
                    f"SELECT term, df FROM lex_terms WHERE profile = ? "
                    f"AND term IN ({marks(len(chunk))})",
                    [profile, *chunk],
                )
            )
        return LexicalStats(n_docs, total / n_docs if n_docs else 0.0, df)

    # -- graph and time ---------------------------------------------------------------

    def find_entities(
        self, profile: str, names: Sequence[str]
    ) -> dict[str, list[tuple[int, str, int]]]:
        return self._conn.read(lambda db: graph.find_entities(db, profile, names))

    def speakers(self, profile: str, entities: Sequence[int]) -> set[int]:
        return self._conn.read(lambda db: graph.speakers(db, profile, entities))

    def entity_members(
        self, profile: str, entities: Sequence[int], limit: int
    ) -> dict[int, list[int]]:
        return self._conn.read(lambda db: graph.entity_members(db, profile, entities, limit))

    def memory_entities(
        self, profile: str, keys: Sequence[int]
    ) -> dict[int, list[tuple[int, str, int, int]]]:
        return self._conn.read(lambda db: graph.memory_entities(db, profile, keys))

    def edges_from(
        self, profile: str, keys: Sequence[int]
    ) -> dict[int, list[tuple[int, str, float]]]:
        return self._conn.read(lambda db: graph.edges_from(db, profile, keys))

    def time_overlaps(
        self, profile: str, start: int, end: int, limit: int
    ) -> dict[int, tuple[int, int]] | None:
        return self._conn.read(lambda db: graph.time_overlaps(db, profile, start, end, limit))

    def event_times(self, profile: str, keys: Sequence[int]) -> dict[int, int]:
        out: dict[int, int] = {}
        for chunk in chunks(list(keys)):
            rows = self._read(
                f"SELECT key, event_time FROM memories WHERE +profile = ? "
                f"AND key IN ({marks(len(chunk))})",
                [profile, *chunk],
            )
            out.update(rows)
        return out

    def referenced_times(
        self, profile: str, keys: Sequence[int]
    ) -> dict[int, list[tuple[int, int]]]:
        return self._conn.read(lambda db: graph.referenced_times(db, profile, keys))

    # -- vectors ----------------------------------------------------------------------

    def vector_search(
        self,
        profile: str,
        query: Vector,
        k: int,
        allowed: set[int] | None,
        below: int | None = None,
    ) -> list[tuple[int, float]]:
        with self._lock:
            return self._vectors.index(profile).search(query, k, allowed, below)

    def vector_search_many(
        self, profile: str, queries: Vector, k: int
    ) -> list[list[tuple[int, float]]]:
        with self._lock:
            return self._vectors.index(profile).search_many(queries, k)

    def mean_vector(self, profile: str) -> tuple[Vector, int]:
        with self._lock:
            index = self._vectors.index(profile)
            return index.mean(), len(index)

    def vectors(self, profile: str, keys: Sequence[int]) -> Vector:
        with self._lock:
            loaded = self._vectors.loaded(profile)
            cached = loaded.get(list(keys)) if loaded is not None else None
        if cached is not None:
            return cached
        by_key: dict[int, bytes] = {}
        for chunk in chunks(list(keys)):
            rows = self._read(
                f"SELECT key, vector FROM embeddings WHERE +profile = ? "
                f"AND key IN ({marks(len(chunk))})",
                [profile, *chunk],
            )
            by_key.update(rows)
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
        found = self._conn.read(lambda db: passage_rows.statements(db, [key for key, _ in hits]))
        return [(key // PASSAGE_SPAN, *found[key], cosine) for key, cosine in hits if key in found]

    def rebuild_vectors(self, profile: str) -> int:
        """Rebuild the profile's vector indexes from the rows (``slm reindex``)."""
        with self._lock:
            self._passages.rebuild(profile)
            self._standing.rebuild(profile)
            return self._vectors.rebuild(profile)

    # -- lifecycle --------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        try:
            mode = self._read("PRAGMA journal_mode")[0][0]
            return {
                "kind": self.kind,
                "location": self.location,
                "healthy": True,
                "journal_mode": mode,
                "synchronous": "full",
                "busy_retries": self.busy_retries,
                "vector_indexes": self._vector_info(),
                "reason": None,
            }
        except StoreError as exc:
            return {
                "kind": self.kind,
                "location": self.location,
                "healthy": False,
                "reason": str(exc),
            }

    def _vector_info(self) -> dict[str, Any]:
        with self._lock:
            info = self._vectors.info()
            for name, cache in (("passages", self._passages), ("standing", self._standing)):
                for profile, state in cache.info().items():
                    info.setdefault(profile, {})[name] = state
            return info

    def backup(self, target: Path) -> int:
        """Copy the whole store (every profile) into the new file ``target`` while it stays
        in use; return how many memories the copy holds (see :meth:`Connection.backup`)."""
        try:
            return self._conn.backup(target)
        except OSError as exc:
            raise StoreError(f"cannot back up {self.path} to {target}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            for cache in self._caches:
                cache.save_all()
        self._conn.close()
