"""The metadata fields index: one row per top-level plain value of a memory's metadata
(a string, number, true/false or null), so that a metadata filter on recall or list
(``{"user_id": "u7", "session": [3, 4]}``) is an index lookup rather than a scan of every
memory's JSON. Written in the same transaction as the memory; the SQL is the same for both
stores (``mark`` is the driver's placeholder). The table, ``memory_fields``, is in
:mod:`slm.store.schema`.

Names and values are kept as JSON text (``"user_id"``; ``"u7"``, ``3``, ``true``, ``null``):
any key is stored as written (a NUL included, which PostgreSQL's text refuses raw), and a
filter matches by JSON value and type, the same on both stores (neither reads the JSON in
SQL): the text ``"7"`` is not the number ``7``, ``true`` is not ``1``, and numbers match as
written (``1`` and ``1.0`` differ).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from slm.models import NewMemory
from slm.store.base import Cursor


def canonical(value: Any) -> str:
    """A plain metadata value as the JSON text the index keeps."""
    return json.dumps(value, ensure_ascii=False)


def is_plain(value: Any) -> bool:
    return value is None or isinstance(value, str | bool | int | float)


def rows_of(profile: str, key: int, metadata: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (key, profile, canonical(name), canonical(v)) for name, v in metadata.items() if is_plain(v)
    ]


def insert(cur: Cursor, mark: str, profile: str, fresh: Sequence[tuple[int, NewMemory]]) -> None:
    """Index the metadata of new memories."""
    _write(cur, mark, [row for key, item in fresh for row in rows_of(profile, key, item.metadata)])


def _write(cur: Cursor, mark: str, rows: list[tuple[Any, ...]]) -> None:
    if rows:
        cur.executemany(
            f"INSERT INTO memory_fields (key, profile, name, value) "
            f"VALUES ({mark}, {mark}, {mark}, {mark}) ON CONFLICT DO NOTHING",
            rows,
        )


def delete(cur: Cursor, mark: str, key: int) -> None:
    cur.execute(f"DELETE FROM memory_fields WHERE key = {mark}", [key])


def backfill(cur: Cursor, mark: str) -> None:
    """Index the memories stored before the index existed (run once, by the migration)."""
    stored = cur.execute("SELECT key, profile, metadata FROM memories").fetchall()
    _write(cur, mark, [row for key, p, text in stored for row in rows_of(p, key, json.loads(text))])


def lookup(mark: str, profile: str, name: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """The keys of ``profile``'s memories whose metadata ``name`` holds one of ``values``."""
    marks = ", ".join([mark] * len(values))
    return (
        f"SELECT key FROM memory_fields WHERE profile = {mark} AND name = {mark} "
        f"AND value IN ({marks})",
        [profile, canonical(name), *(canonical(v) for v in values)],
    )


def matching(
    mark: str, profile: str, metadata: Sequence[tuple[str, Sequence[Any]]]
) -> tuple[str, list[Any]]:
    """The keys of ``profile``'s memories holding, for each name, one of its values."""
    parts = [lookup(mark, profile, name, values) for name, values in metadata]
    return " INTERSECT ".join(q for q, _ in parts), [p for _, bound in parts for p in bound]


def clause(mark: str, profile: str, name: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """The memories of ``profile`` whose metadata ``name`` holds one of ``values``."""
    query, params = lookup(mark, profile, name, values)
    return f"key IN ({query})", params


#: What says whether a profile's memories changed: the highest key of the store (every new
#: memory raises it) and the profile's document count (every forgotten one lowers it).
STAMP_SQL = (
    "SELECT (SELECT coalesce(max(key), 0) FROM memories), "
    "(SELECT coalesce(max(n_docs), 0) FROM lex_stats WHERE profile = {mark})"
)


class AllowedKeys:
    """The keys a metadata-only filter admits, kept while the profile's memories stay the
    same: metadata never changes after a memory is stored, so the set only changes when a
    memory is stored or forgotten, which the stamp tells with two index lookups. An agent
    that always filters by its user pays for the lookup once. Thread-safe; the least
    recently used of ``limit`` filters goes first.

    A filter is kept under its query as bound (the JSON text of its names and values), not
    under the filter's Python values: ``True == 1 == 1.0`` in Python, and a filter on one
    must not answer for the others."""

    def __init__(self, limit: int = 64) -> None:
        self.limit = limit
        self._held: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], set[int]]] = OrderedDict()
        self._lock = threading.Lock()

    def keys(
        self,
        read: Callable[[str, list[Any]], list[Any]],
        mark: str,
        profile: str,
        query: tuple[str, list[Any]],
    ) -> set[int]:
        """The keys ``query`` selects, from the cache when the stamp has not moved."""
        stamp = tuple(read(STAMP_SQL.format(mark=mark), [profile])[0])
        wanted = (profile, query[0], *query[1])
        with self._lock:
            held = self._held.get(wanted)
            if held is not None and held[0] == stamp:
                self._held.move_to_end(wanted)
                return held[1]
        found = {row[0] for row in read(*query)}
        with self._lock:
            self._held[wanted] = (stamp, found)
            while len(self._held) > self.limit:
                self._held.popitem(last=False)
        return found
