"""The server store: PostgreSQL with pgvector, chosen by a DSN.

The same tables, derived data and BM25 statistics as the SQLite store (see
:mod:`slm.store.postgres_schema`), so both answer every :class:`~slm.store.base.Store`
call alike; the BM25 channel computes its scores in Python from :meth:`postings` and
:meth:`lexical_stats` for both. Vectors live in pgvector with an HNSW index; a search over
at most ``EXACT_SCAN_LIMIT`` candidates is an exact scan instead (see :meth:`vector_search`).

Concurrency: connections come from a small pool, one per calling thread. Every write is
one transaction that first takes a per-profile advisory lock, so writers to one profile
are serialised (as SQLite serialises all writers) and writers to different profiles run
in parallel. Every statement filters on the profile.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import Cursor
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool

from slm.errors import ConfigError, StoreError, disk_full
from slm.models import NewMemory, to_micros
from slm.store import fields, lifecycle, sql
from slm.store import postgres_graph as graph
from slm.store import postgres_lexical as lexical
from slm.store import postgres_passages as passage_sql
from slm.store.base import (
    Filters,
    LexicalStats,
    Postings,
    Stored,
    Vector,
    best_per_memory,
)
from slm.store.postgres_schema import migrate
from slm.store.relational import Relational

#: Vector searches over at most this many candidates (the allowed keys, or the profile's
#: memories) scan them exactly; larger ones use the HNSW index.
EXACT_SCAN_LIMIT = 10_000
#: Advisory lock namespace (first of two int4 keys) of the per-profile write locks.
PROFILE_LOCK_SPACE = 0x736C6D
#: The HNSW candidate list is at least this long (pgvector's default) and at most 1000.
MIN_EF_SEARCH = 40
#: How long a profile's size, read to choose between exact and HNSW search, is reused.
SIZE_TTL_S = 1.0

T = TypeVar("T")
_INSERT_MEMORY = (
    "INSERT INTO memories (id, profile, content, content_hash, event_time, recorded_at, "
    "source, confidence, metadata, tags, session, valid_from, valid_to, superseded_by) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
    "ON CONFLICT DO NOTHING RETURNING content_hash, id, key"
)


def _tag_clauses(profile: str, tags: Sequence[str]) -> list[tuple[str, list[Any]]]:
    return [("tags @> %s::text[]", [list(tags)])]


def redact(dsn: str) -> str:
    """The DSN without its password, for messages and ``health``."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(f"not a valid PostgreSQL DSN: {exc}") from None
    params.pop("password", None)
    return make_conninfo("", **params)


class PostgresStore(Relational):
    """PostgreSQL implementation of :class:`~slm.store.base.Store` (what both stores do
    alike is :class:`~slm.store.relational.Relational`)."""

    kind = "postgres"
    mark = "%s"
    meta_table = "slm_meta"
    chunk = 5000

    def __init__(self, dsn: str, *, dim: int, pool_size: int = 4) -> None:
        self.location = redact(dsn)
        self.dim = dim
        self._sizes: dict[str, tuple[float, int]] = {}
        self._allowed = fields.AllowedKeys()
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                migrate(conn, dim)
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
        except psycopg.Error as exc:
            raise StoreError(f"cannot open PostgreSQL store at {self.location}: {exc}") from exc

    # -- plumbing ---------------------------------------------------------------------

    @contextmanager
    def _cursor(self) -> Iterator[Cursor[Any]]:
        try:
            with self._pool.connection() as conn, conn.cursor() as cur:
                yield cur
        except psycopg.Error as exc:
            raise StoreError(f"read failed on {self.location}: {exc}") from exc

    @contextmanager
    def _write(self, profile: str | None) -> Iterator[Cursor[Any]]:
        """One transaction; with a profile, holding that profile's write lock."""
        try:
            with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
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

    def _select(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._rows(sql, params)

    def _change(self, profile: str | None, work: Callable[[lifecycle.Cursor], T]) -> T:
        with self._write(profile) as cur:
            return work(cur)

    @staticmethod
    def _tags(value: Any) -> tuple[str, ...]:
        return tuple(value)

    # -- writes -----------------------------------------------------------------------

    def insert(
        self, profile: str, items: Sequence[NewMemory], *, supersede_updates: bool = False
    ) -> list[Stored]:
        results: list[Stored] = []
        with self._write(profile) as cur:
            cur.execute(
                "SELECT content_hash, id, key FROM memories WHERE profile = %s "
                "AND content_hash = ANY(%s)",
                (profile, list(dict.fromkeys(i.content_hash for i in items))),
            )
            known: dict[str, tuple[str, int]] = {h: (i, k) for h, i, k in cur.fetchall()}
            new = {i.content_hash: i for i in items if i.content_hash not in known}
            created = self._insert_rows(cur, profile, list(new.values()))
            for item in items:
                if item.content_hash in known:
                    results.append(Stored(*known[item.content_hash], created=False))
                    continue
                known[item.content_hash] = created[item.content_hash]
                results.append(Stored(*created[item.content_hash], created=True))
            fresh = [(created[m.content_hash][1], m) for m in new.values()]
            self._insert_derived(cur, profile, fresh)
            for m in new.values():
                id_ = created[m.content_hash][0]
                lifecycle.supersede(cur, "%s", profile, id_, m.supersedes, lifecycle.start(m))
            fields.insert(cur, "%s", profile, fresh)
            lifecycle.insert_facts(cur, "%s", profile, fresh, supersede_updates)
        return results

    def _insert_rows(
        self, cur: Cursor[Any], profile: str, items: Sequence[NewMemory]
    ) -> dict[str, tuple[str, int]]:
        """Insert memory rows, keys in the order of ``items``; content hash -> (id, key).
        A wanted id already taken (in another profile) is replaced by a fresh one; so is one
        taken meanwhile by a concurrent writer, whose memory then comes after the others."""
        pending = list(items)
        ids = {m.content_hash: m.id or secrets.token_hex(8) for m in pending}
        cur.execute("SELECT id FROM memories WHERE id = ANY(%s)", (list(ids.values()),))
        taken = {row[0] for row in cur.fetchall()}
        ids = {h: secrets.token_hex(8) if i in taken else i for h, i in ids.items()}
        out: dict[str, tuple[str, int]] = {}
        for _ in range(8):
            if not pending:
                return out
            cur.executemany(
                _INSERT_MEMORY,
                [_memory_row(profile, ids[m.content_hash], m) for m in pending],
                returning=True,
            )
            for result in cur.results():
                for content_hash, id_, key in result.fetchall():
                    out[content_hash] = (id_, key)
            pending = [m for m in pending if m.content_hash not in out]
            ids.update((m.content_hash, secrets.token_hex(8)) for m in pending)
        raise StoreError(f"could not find free ids for {len(pending)} memories")

    def _insert_derived(
        self,
        cur: Cursor[Any],
        profile: str,
        fresh: Sequence[tuple[int, NewMemory]],
        rederive: bool = False,
    ) -> None:
        if not fresh:
            return
        if not rederive:
            vectors = [np.frombuffer(m.vector, dtype="<f4") for _, m in fresh]
            cur.executemany(
                "INSERT INTO embeddings (key, profile, vector) VALUES (%s, %s, %s)",
                [(key, profile, v) for (key, _), v in zip(fresh, vectors, strict=True)],
            )
            self._add_to_sum(cur, profile, np.sum(vectors, axis=0, dtype=np.float64), len(fresh))
        lexical.insert(cur, profile, fresh)
        graph.insert_graph(cur, profile, fresh)
        passage_sql.insert(cur, profile, fresh)

    def delete(self, profile: str, ids: Sequence[str]) -> list[str]:
        with self._write(profile) as cur:
            cur.execute(
                "SELECT m.key, m.id, d.terms FROM memories m LEFT JOIN lex_docs d "
                "ON d.key = m.key WHERE m.profile = %s AND m.id = ANY(%s) ORDER BY m.key",
                (profile, list(ids)),
            )
            rows = cur.fetchall()
            for key, _, terms in rows:
                self._delete_derived(
                    cur, profile, key, terms.split() if terms is not None else None
                )
                lifecycle.delete_facts(cur, "%s", profile, key)
                fields.delete(cur, "%s", key)
            keys = [key for key, _, _ in rows]
            passage_sql.delete(cur, profile, keys)
            cur.execute(
                "DELETE FROM embeddings WHERE profile = %s AND key = ANY(%s) RETURNING vector",
                (profile, keys),
            )
            gone = [row[0].to_numpy() for row in cur.fetchall()]
            if gone:
                self._add_to_sum(cur, profile, -np.sum(gone, axis=0, dtype=np.float64), -len(gone))
            cur.execute(
                "DELETE FROM memories WHERE profile = %s AND key = ANY(%s)", (profile, keys)
            )
            for _, id_, _ in rows:
                lifecycle.reinstate(cur, "%s", profile, id_)
        removed = {id_ for _, id_, _ in rows}
        return [i for i in dict.fromkeys(ids) if i in removed]

    def _add_to_sum(self, cur: Cursor[Any], profile: str, total: Any, count: int) -> None:
        """Keep the profile's vector sum (for :meth:`mean_vector`) in the same transaction."""
        cur.execute("SELECT n, total FROM vector_sums WHERE profile = %s FOR UPDATE", (profile,))
        row = cur.fetchone()
        n, old = (row[0], np.asarray(row[1], dtype=np.float64)) if row else (0, 0.0)
        cur.execute(
            "INSERT INTO vector_sums (profile, n, total) VALUES (%s, %s, %s) "
            "ON CONFLICT (profile) DO UPDATE SET n = excluded.n, total = excluded.total",
            (profile, n + count, (old + total).tolist()),
        )

    def _delete_derived(
        self,
        cur: Cursor[Any],
        profile: str,
        key: int,
        terms: list[str] | None,
        relink: bool = True,
    ) -> None:
        """Lexical and graph rows of one memory (not its vector or row); ``terms`` None
        means it has no lexical rows."""
        graph.delete_graph(cur, profile, key, relink)
        if terms is None:
            return
        lexical.delete(cur, profile, key, terms)

    def rederive(self, profile: str, items: Sequence[tuple[int, NewMemory]]) -> None:
        """Replace the lexical, graph and passage rows of stored memories (``slm reindex``)
        in one transaction. Embeddings are kept: they never need recomputing."""
        with self._write(profile) as cur:
            cur.execute(
                "SELECT key, terms FROM lex_docs WHERE profile = %s AND key = ANY(%s)",
                (profile, [key for key, _ in items]),
            )
            terms: dict[int, str] = dict(cur.fetchall())
            for key, _ in items:
                words = terms[key].split() if key in terms else None
                self._delete_derived(cur, profile, key, words, relink=False)
                lifecycle.delete_facts(cur, "%s", profile, key, relinked=False)
            passage_sql.delete(cur, profile, [key for key, _ in items])
            self._insert_derived(cur, profile, list(items), rederive=True)
            lifecycle.insert_facts(cur, "%s", profile, list(items))

    # -- reads ------------------------------------------------------------------------

    @staticmethod
    def _where(profile: str, filters: Filters) -> tuple[str, list[Any]]:
        return sql.memory_filter(profile, filters, "%s", _tag_clauses)

    def doc_terms(self, profile: str, keys: Sequence[int]) -> dict[int, list[str]]:
        with self._cursor() as cur:
            return lexical.doc_terms(cur, profile, keys)

    def postings(self, profile: str, terms: Sequence[str], limit: int) -> dict[str, Postings]:
        with self._cursor() as cur:
            return lexical.postings(cur, profile, terms, limit)

    def lexical_stats(self, profile: str, terms: Sequence[str]) -> LexicalStats:
        with self._cursor() as cur:
            return lexical.stats(cur, profile, terms)

    # -- graph and time ---------------------------------------------------------------

    def find_entities(
        self, profile: str, names: Sequence[str]
    ) -> dict[str, list[tuple[int, str, int]]]:
        with self._cursor() as cur:
            return graph.find_entities(cur, profile, names)

    def speakers(self, profile: str, entities: Sequence[int]) -> set[int]:
        with self._cursor() as cur:
            return graph.speakers(cur, profile, entities)

    def entity_members(
        self, profile: str, entities: Sequence[int], limit: int
    ) -> dict[int, list[int]]:
        with self._cursor() as cur:
            return graph.entity_members(cur, profile, entities, limit)

    def memory_entities(
        self, profile: str, keys: Sequence[int]
    ) -> dict[int, list[tuple[int, str, int, int]]]:
        with self._cursor() as cur:
            return graph.memory_entities(cur, profile, keys)

    def edges_from(
        self, profile: str, keys: Sequence[int]
    ) -> dict[int, list[tuple[int, str, float]]]:
        with self._cursor() as cur:
            return graph.edges_from(cur, profile, keys)

    def time_overlaps(
        self, profile: str, start: int, end: int, limit: int
    ) -> dict[int, tuple[int, int]] | None:
        with self._cursor() as cur:
            return graph.time_overlaps(cur, profile, start, end, limit)

    def event_times(self, profile: str, keys: Sequence[int]) -> dict[int, int]:
        return dict(
            self._rows(
                "SELECT key, event_time FROM memories WHERE profile = %s AND key = ANY(%s)",
                (profile, list(keys)),
            )
        )

    def referenced_times(
        self, profile: str, keys: Sequence[int]
    ) -> dict[int, list[tuple[int, int]]]:
        with self._cursor() as cur:
            return graph.referenced_times(cur, profile, keys)

    # -- vectors ----------------------------------------------------------------------

    def vector_search_many(
        self, profile: str, queries: Vector, k: int
    ) -> list[list[tuple[int, float]]]:
        return [self.vector_search(profile, query, k, None) for query in queries]

    def passage_search(
        self, profile: str, query: Vector, k: int, allowed: set[int] | None
    ) -> list[tuple[int, float]]:
        with self._cursor() as cur:
            return best_per_memory(passage_sql.search(cur, profile, query, k), allowed)

    def passages(
        self, profile: str, keys: Sequence[int], standing: bool = False
    ) -> dict[int, Vector]:
        with self._cursor() as cur:
            return passage_sql.vectors(cur, profile, keys, self.dim, standing)

    def standing_search(
        self, profile: str, query: Vector, k: int
    ) -> list[tuple[int, str, str, float]]:
        with self._cursor() as cur:
            return passage_sql.standing(cur, profile, query, k)

    def rebuild_vectors(self, profile: str) -> int:
        """The HNSW index is maintained by PostgreSQL itself: nothing to rebuild here."""
        with self._cursor() as cur:
            return self._profile_size(cur, profile)

    def vector_search(
        self,
        profile: str,
        query: Vector,
        k: int,
        allowed: set[int] | None,
        below: int | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``k`` by cosine. At most ``EXACT_SCAN_LIMIT`` candidates are scanned exactly,
        by inner product (the cosine of unit vectors, as in the SQLite store), which the
        cosine HNSW index cannot serve, so no plan can make it approximate. More go through
        the HNSW index (``1 - (vector <=> query)``) with pgvector's iterative scan, so the
        filters (profile, ``allowed``, ``below``) still leave ``k`` hits."""
        if k <= 0 or (allowed is not None and not allowed):
            return []
        clauses: list[str] = ["profile = %s"]
        params: list[Any] = [profile]
        if allowed is not None:
            clauses.append("key = ANY(%s)")
            params.append(list(allowed))
        if below is not None:
            clauses.append("key < %s")
            params.append(below)
        where = " AND ".join(clauses)
        args = [np.asarray(query, dtype=np.float32), *params, k]
        with self._cursor() as cur:
            size = len(allowed) if allowed is not None else self._profile_size(cur, profile)
            if size <= EXACT_SCAN_LIMIT:
                cur.execute(
                    f"SELECT key, -(vector <#> %s) AS cosine FROM embeddings WHERE {where} "
                    "ORDER BY cosine DESC, key LIMIT %s",
                    args,
                )
                rows = cur.fetchall()
            else:
                with cur.connection.transaction():
                    cur.execute(
                        "SELECT set_config('hnsw.ef_search', %s, true), "
                        "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
                        (str(min(max(k, MIN_EF_SEARCH), 1000)),),
                    )
                    cur.execute(
                        f"SELECT key, 1 - (vector <=> %s) FROM embeddings WHERE {where} "
                        "ORDER BY vector <=> %s LIMIT %s",
                        [args[0], *params, args[0], k],
                    )
                    rows = cur.fetchall()
        pairs = [(int(key), float(cosine)) for key, cosine in rows]
        pairs.sort(key=lambda p: (-p[1], p[0]))
        return pairs

    def _profile_size(self, cur: Cursor[Any], profile: str) -> int:
        """The profile's number of memories, from the statistics every write keeps; read at
        most every ``SIZE_TTL_S`` seconds, since it only chooses between two correct plans."""
        now = time.monotonic()
        cached = self._sizes.get(profile)
        if cached is not None and now - cached[0] < SIZE_TTL_S:
            return cached[1]
        cur.execute("SELECT n_docs FROM lex_stats WHERE profile = %s", (profile,))
        row = cur.fetchone()
        size = int(row[0]) if row else 0
        self._sizes[profile] = (now, size)
        return size

    def mean_vector(self, profile: str) -> tuple[Vector, int]:
        rows = self._rows("SELECT n, total FROM vector_sums WHERE profile = %s", (profile,))
        if not rows or not rows[0][0]:
            return np.zeros(self.dim, dtype=np.float32), 0
        n, total = rows[0]
        return (np.asarray(total, dtype=np.float64) / n).astype(np.float32), int(n)

    def vectors(self, profile: str, keys: Sequence[int]) -> Vector:
        rows = self._rows(
            "SELECT key, vector FROM embeddings WHERE profile = %s AND key = ANY(%s)",
            (profile, list(keys)),
            binary=True,
        )
        by_key = {key: vector.to_numpy() for key, vector in rows}
        out = np.zeros((len(keys), self.dim), dtype=np.float32)
        for row, key in enumerate(keys):
            if key in by_key:
                out[row] = by_key[key]
        return out

    # -- lifecycle --------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        try:
            version, pgvector = self._rows(
                "SELECT current_setting('server_version'), "
                "(SELECT extversion FROM pg_extension WHERE extname = 'vector')"
            )[0]
        except StoreError as exc:
            return {
                "kind": self.kind,
                "location": self.location,
                "healthy": False,
                "reason": str(exc),
            }
        stats = self._pool.get_stats()
        return {
            "kind": self.kind,
            "location": self.location,
            "healthy": True,
            "server_version": version,
            "pgvector": pgvector,
            "pool": {"size": stats.get("pool_size", 0), "max": self._pool.max_size},
            "reason": None,
        }

    def close(self) -> None:
        self._pool.close()


def _memory_row(profile: str, id_: str, m: NewMemory) -> tuple[Any, ...]:
    return (
        id_,
        profile,
        m.content,
        m.content_hash,
        to_micros(m.event_time),
        to_micros(m.recorded_at),
        m.source,
        m.confidence,
        json.dumps(dict(m.metadata), ensure_ascii=False, sort_keys=True),
        list(m.tags),
        m.session,
        to_micros(m.valid_from) if m.valid_from is not None else None,
        to_micros(m.valid_to) if m.valid_to is not None else None,
        m.superseded_by,
    )
