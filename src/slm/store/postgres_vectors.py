"""The PostgreSQL store's :class:`~slm.store.base.Vectors`: pgvector, with HNSW indexes.

The memories' vectors are in ``embeddings``; their further passages and standing
statements in ``passages`` (keyed as in :data:`slm.store.base.PASSAGE_SPAN`), both written
with the memory in the store's transaction. A search over few candidates is an exact scan
by inner product (the cosine of unit vectors, as in the SQLite store), which the cosine
HNSW index cannot serve, so no plan can make it approximate. A larger one goes through
the HNSW index (``1 - (vector <=> query)``) with pgvector's iterative scan, so that
filters still leave ``k`` hits. The server keeps the indexes: nothing is cached here but
each profile's size, which only chooses between those two plans.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
from psycopg import Cursor

from slm.store.base import Vector, best_per_memory

#: Vector searches over at most this many candidates (the allowed keys, or the profile's
#: memories) scan them exactly; larger ones use the HNSW index.
EXACT_SCAN_LIMIT = 10_000
#: Up to this many passages a profile holds are scanned exactly.
EXACT_PASSAGES = 20_000
#: The HNSW candidate list is at least this long (pgvector's default) and at most 1000.
MIN_EF_SEARCH = 40
#: How long a profile's size, read to choose between exact and HNSW search, is reused.
SIZE_TTL_S = 1.0

Pairs = list[tuple[int, float]]


class PostgresVectors:
    """Searches and reads over the vectors of one PostgreSQL store (``cursor`` opens one
    of its pooled connections)."""

    def __init__(self, cursor: Callable[[], AbstractContextManager[Cursor[Any]]], dim: int) -> None:
        self._cursor = cursor
        self.dim = dim
        self._sizes: dict[str, tuple[float, int]] = {}

    def search(
        self,
        profile: str,
        query: Vector,
        k: int,
        allowed: set[int] | None,
        below: int | None = None,
    ) -> Pairs:
        if k <= 0 or (allowed is not None and not allowed):
            return []
        where, params = "profile = %s", list[Any]([profile])
        if allowed is not None:
            where += " AND key = ANY(%s)"
            params.append(list(allowed))
        if below is not None:
            where += " AND key < %s"
            params.append(below)
        with self._cursor() as cur:
            size = len(allowed) if allowed is not None else self._size(cur, profile)
            return _nearest(cur, "embeddings", where, params, query, k, size <= EXACT_SCAN_LIMIT)

    def search_many(self, profile: str, queries: Vector, k: int) -> list[Pairs]:
        return [self.search(profile, query, k, None) for query in queries]

    def passage_search(
        self, profile: str, query: Vector, k: int, allowed: set[int] | None
    ) -> Pairs:
        where = "profile = %s AND kind = 'passage'"
        with self._cursor() as cur:
            (few,) = cur.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM passages WHERE {where} LIMIT %s) AS few",
                (profile, EXACT_PASSAGES + 1),
            ).fetchone() or (0,)
            hits = _nearest(cur, "passages", where, [profile], query, k, few <= EXACT_PASSAGES)
        return best_per_memory(hits, allowed)

    def passages(
        self, profile: str, keys: Sequence[int], standing: bool = False
    ) -> dict[int, Vector]:
        kind = "<>" if standing else "="
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT memory, vector FROM passages WHERE profile = %s AND memory = ANY(%s) "
                f"AND kind {kind} 'passage' ORDER BY key",
                (profile, list(keys)),
                binary=True,
            ).fetchall()
        grouped: dict[int, list[Any]] = {}
        for memory, vector in rows:
            grouped.setdefault(int(memory), []).append(vector.to_numpy())
        return {
            memory: np.asarray(found, dtype=np.float32).reshape(-1, self.dim)
            for memory, found in grouped.items()
        }

    def standing_search(
        self, profile: str, query: Vector, k: int
    ) -> list[tuple[int, str, str, float]]:
        """Standing statements are few next to memories: scanned exactly."""
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT memory, kind, coalesce(text, ''), -(vector <#> %s) AS cosine "
                "FROM passages WHERE profile = %s AND kind <> 'passage' "
                "ORDER BY cosine DESC, key LIMIT %s",
                (np.asarray(query, dtype=np.float32), profile, k),
            ).fetchall()
        return [(int(m), str(kind), str(text), float(c)) for m, kind, text, c in rows]

    def rebuild(self, profile: str) -> int:
        """PostgreSQL maintains the HNSW indexes itself: nothing to rebuild."""
        with self._cursor() as cur:
            return self._size(cur, profile)

    def mean(self, profile: str) -> tuple[Vector, int]:
        """From the sum of the profile's vectors, kept by every write (``vector_sums``)."""
        with self._cursor() as cur:
            row = cur.execute(
                "SELECT n, total FROM vector_sums WHERE profile = %s", (profile,)
            ).fetchone()
        if not row or not row[0]:
            return np.zeros(self.dim, dtype=np.float32), 0
        n, total = row
        return (np.asarray(total, dtype=np.float64) / n).astype(np.float32), int(n)

    def get(self, profile: str, keys: Sequence[int]) -> Vector:
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT key, vector FROM embeddings WHERE profile = %s AND key = ANY(%s)",
                (profile, list(keys)),
                binary=True,
            ).fetchall()
        by_key = {key: vector.to_numpy() for key, vector in rows}
        out = np.zeros((len(keys), self.dim), dtype=np.float32)
        for row, key in enumerate(keys):
            if key in by_key:
                out[row] = by_key[key]
        return out

    def _size(self, cur: Cursor[Any], profile: str) -> int:
        """The profile's number of memories, from the statistics every write keeps; read at
        most every ``SIZE_TTL_S`` seconds, since it only chooses between two correct plans."""
        now = time.monotonic()
        cached = self._sizes.get(profile)
        if cached is not None and now - cached[0] < SIZE_TTL_S:
            return cached[1]
        row = cur.execute("SELECT n_docs FROM lex_stats WHERE profile = %s", (profile,)).fetchone()
        size = int(row[0]) if row else 0
        self._sizes[profile] = (now, size)
        return size


def _nearest(
    cur: Cursor[Any],
    table: str,
    where: str,
    params: list[Any],
    query: Vector,
    k: int,
    exact: bool,
) -> Pairs:
    """The ``k`` rows of ``table`` passing ``where`` most similar to ``query``, as (key,
    cosine), best first, ties by key: scanned exactly, or through the table's HNSW index."""
    vector = np.asarray(query, dtype=np.float32)
    if exact:
        rows = cur.execute(
            f"SELECT key, -(vector <#> %s) AS cosine FROM {table} WHERE {where} "
            "ORDER BY cosine DESC, key LIMIT %s",
            [vector, *params, k],
        ).fetchall()
    else:
        with cur.connection.transaction():
            cur.execute(
                "SELECT set_config('hnsw.ef_search', %s, true), "
                "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
                (str(min(max(k, MIN_EF_SEARCH), 1000)),),
            )
            rows = cur.execute(
                f"SELECT key, 1 - (vector <=> %s) FROM {table} WHERE {where} "
                "ORDER BY vector <=> %s LIMIT %s",
                [vector, *params, vector, k],
            ).fetchall()
    pairs = [(int(key), float(cosine)) for key, cosine in rows]
    pairs.sort(key=lambda p: (-p[1], p[0]))
    return pairs
