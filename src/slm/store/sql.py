"""SQL both stores share, written once: the memory columns, the filter of a list or a
count, and the statements that page and scan memories. ``mark`` is the placeholder of the
driver (``?`` for sqlite3, ``%s`` for psycopg); each store says how it matches tags."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from slm.models import NewMemory, from_micros, to_micros
from slm.store import fields
from slm.store.base import Filters

#: The columns a memory row is read with, in the order both stores' ``_record`` expect.
MEMORY_COLUMNS = (
    "key, id, content, event_time, recorded_at, source, confidence, metadata, tags, "
    "valid_from, valid_to, superseded_by, scope"
)

#: The columns :func:`memory_row` fills, in its order.
INSERT_COLUMNS = (
    "id, profile, content, content_hash, event_time, recorded_at, source, confidence, "
    "metadata, tags, session, valid_from, valid_to, superseded_by, scope"
)


def memory_row(profile: str, id_: str, m: NewMemory, tags: Any) -> tuple[Any, ...]:
    """The values of a new memory's row (:data:`INSERT_COLUMNS`), its tags as the store
    keeps them."""
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
        tags,
        m.session,
        to_micros(m.valid_from) if m.valid_from is not None else None,
        to_micros(m.valid_to) if m.valid_to is not None else None,
        m.superseded_by,
        m.scope,
    )


#: Each profile holding memories: its name, how many, and the last time one was recorded.
PROFILE_SUMMARIES = (
    "SELECT profile, count(*), max(recorded_at) FROM memories GROUP BY profile ORDER BY profile"
)

#: How a store matches tags: (profile, tags) -> the clauses and their parameters.
TagMatch = Callable[[str, Sequence[str]], list[tuple[str, list[Any]]]]


def memory_filter(
    profile: str,
    filters: Filters,
    mark: str,
    tags: TagMatch,
    profile_column: str = "profile",
) -> tuple[str, list[Any]]:
    """The ``WHERE`` condition (and its parameters) selecting a profile's memories that
    pass ``filters``: source, tags (all present), event time in ``[after, before)``, the
    text the content contains, validity at a moment."""
    clauses = [f"{profile_column} = {mark}"]
    params: list[Any] = [profile]
    if filters.source is not None:
        clauses.append(f"source = {mark}")
        params.append(filters.source)
    if filters.tags:
        for clause, values in tags(profile, filters.tags):
            clauses.append(clause)
            params.extend(values)
    if filters.after is not None:
        clauses.append(f"event_time >= {mark}")
        params.append(to_micros(filters.after))
    if filters.before is not None:
        clauses.append(f"event_time < {mark}")
        params.append(to_micros(filters.before))
    for name, allowed in filters.metadata:
        clause, values = fields.clause(mark, profile, name, allowed)
        clauses.append(clause)
        params.extend(values)
    if filters.text is not None:
        # lower() on both sides, so that the database folds case the same way for both
        clauses.append(f"lower(content) LIKE lower({mark}) ESCAPE '\\'")
        params.append(f"%{_like_escaped(filters.text)}%")
    if filters.as_of is not None:
        moment = to_micros(filters.as_of)
        clauses.append(f"coalesce(valid_from, event_time) <= {mark}")
        clauses.append(f"(valid_to IS NULL OR valid_to > {mark})")
        params.extend([moment, moment])
    return " AND ".join(clauses), params


def allowed_keys(
    read: Callable[[str, list[Any]], list[Any]],
    cache: fields.AllowedKeys,
    profile: str,
    filters: Filters,
    mark: str,
    where: str,
    params: list[Any],
) -> set[int]:
    """The keys of ``profile``'s memories that pass ``filters`` (``where``, ``params``: the
    store's condition for them). A filter that asks only about metadata is read straight
    from the metadata index (one index range per key, intersected), through ``cache``."""
    if filters.metadata and replace(filters, metadata=()).is_empty():
        query = fields.matching(mark, profile, filters.metadata)
        return cache.keys(read, mark, profile, query)
    return {row[0] for row in read(f"SELECT key FROM memories WHERE {where}", params)}


def _like_escaped(text: str) -> str:
    """``text`` with LIKE's wildcards escaped, so that it is matched as written."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def record_times(row: Sequence[Any]) -> dict[str, Any]:
    """The validity fields and the scope of a row read with :data:`MEMORY_COLUMNS` (its
    last four)."""
    valid_from, valid_to, superseded_by, scope = row[-4:]
    return {
        "valid_from": from_micros(valid_from) if valid_from is not None else None,
        "valid_to": from_micros(valid_to) if valid_to is not None else None,
        "superseded_by": superseded_by,
        "scope": scope,
    }


def page_sql(where: str, mark: str) -> str:
    """Memories passing ``where``, most recently recorded first, then ``LIMIT`` and ``OFFSET``."""
    return (
        f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {where} "
        f"ORDER BY recorded_at DESC, key DESC LIMIT {mark} OFFSET {mark}"
    )


def scan_sql(mark: str) -> str:
    """A profile's memories after a key, in key order, then ``LIMIT``."""
    return (
        f"SELECT {MEMORY_COLUMNS} FROM memories WHERE profile = {mark} AND key > {mark} "
        f"ORDER BY key LIMIT {mark}"
    )


def count_sql(where: str) -> str:
    return f"SELECT count(*) FROM memories WHERE {where}"
