"""The ``passages`` rows of the PostgreSQL store (a memory's further passages and its
standing statements, keyed as in :data:`slm.store.base.PASSAGE_SPAN`), read and written
inside the store's transactions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg import Cursor

from slm.models import NewMemory
from slm.store.base import PASSAGE_SPAN, STANDING_BASE, Vector

#: Up to this many passages a profile holds are scanned exactly (see vector_search).
EXACT_SCAN_LIMIT = 20_000


def insert(cur: Cursor[Any], profile: str, fresh: Sequence[tuple[int, NewMemory]]) -> None:
    rows: list[tuple[int, int, str, str, str | None, Any]] = []
    for key, item in fresh:
        base = key * PASSAGE_SPAN
        rows.extend(
            (base + ordinal, key, profile, "passage", None, np.frombuffer(vector, dtype="<f4"))
            for ordinal, vector in enumerate(item.passages, start=1)
        )
        rows.extend(
            (base + ordinal, key, profile, kind, text, np.frombuffer(vector, dtype="<f4"))
            for ordinal, (kind, text, vector) in enumerate(item.standing, start=STANDING_BASE)
        )
    if rows:
        cur.executemany(
            "INSERT INTO passages (key, memory, profile, kind, text, vector) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            rows,
        )


def delete(cur: Cursor[Any], profile: str, keys: Sequence[int]) -> None:
    cur.execute(
        "DELETE FROM passages WHERE profile = %s AND memory = ANY(%s)", (profile, list(keys))
    )


def search(cur: Cursor[Any], profile: str, query: Vector, k: int) -> list[tuple[int, float]]:
    """The ``k`` passages most similar to ``query`` as (passage key, cosine): exactly by
    inner product for a profile with few passages, else through the HNSW index."""
    vector = np.asarray(query, dtype=np.float32)
    cur.execute(
        "SELECT count(*) FROM (SELECT 1 FROM passages WHERE profile = %s AND kind = 'passage' "
        "LIMIT %s) AS few",
        (profile, EXACT_SCAN_LIMIT + 1),
    )
    row = cur.fetchone()
    if row is not None and row[0] <= EXACT_SCAN_LIMIT:
        cur.execute(
            "SELECT key, -(vector <#> %s) AS cosine FROM passages "
            "WHERE profile = %s AND kind = 'passage' ORDER BY cosine DESC, key LIMIT %s",
            (vector, profile, k),
        )
        return [(int(key), float(cosine)) for key, cosine in cur.fetchall()]
    with cur.connection.transaction():
        cur.execute(
            "SELECT set_config('hnsw.ef_search', %s, true), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
            (str(min(max(k, 40), 1000)),),
        )
        cur.execute(
            "SELECT key, 1 - (vector <=> %s) FROM passages "
            "WHERE profile = %s AND kind = 'passage' ORDER BY vector <=> %s LIMIT %s",
            (vector, profile, vector, k),
        )
        pairs = [(int(key), float(cosine)) for key, cosine in cur.fetchall()]
    pairs.sort(key=lambda p: (-p[1], p[0]))
    return pairs


def vectors(
    cur: Cursor[Any], profile: str, keys: Sequence[int], dim: int, standing: bool
) -> dict[int, Vector]:
    kind = "<>" if standing else "="
    cur.execute(
        "SELECT memory, vector FROM passages WHERE profile = %s AND memory = ANY(%s) "
        f"AND kind {kind} 'passage' ORDER BY key",
        (profile, list(keys)),
        binary=True,
    )
    grouped: dict[int, list[Any]] = {}
    for memory, vector in cur.fetchall():
        grouped.setdefault(int(memory), []).append(vector.to_numpy())
    return {
        memory: np.asarray(rows, dtype=np.float32).reshape(-1, dim)
        for memory, rows in grouped.items()
    }


def standing(
    cur: Cursor[Any], profile: str, query: Vector, k: int
) -> list[tuple[int, str, str, float]]:
    """Standing statements are few next to memories: scanned exactly."""
    cur.execute(
        "SELECT memory, kind, coalesce(text, ''), -(vector <#> %s) AS cosine FROM passages "
        "WHERE profile = %s AND kind <> 'passage' ORDER BY cosine DESC, key LIMIT %s",
        (np.asarray(query, dtype=np.float32), profile, k),
    )
    return [(int(m), str(kind), str(text), float(c)) for m, kind, text, c in cur.fetchall()]
