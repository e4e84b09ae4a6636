"""SQL both stores share, written once: the memory columns, the filter of a list or a
count, and the statements that page and scan memories. ``mark`` is the placeholder of the
driver (``?`` for sqlite3, ``%s`` for psycopg); each store says how it matches tags."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from slm.models import to_micros
from slm.store.base import Filters

#: The columns a memory row is read with, in the order both stores' ``_record`` expect.
MEMORY_COLUMNS = "key, id, content, event_time, recorded_at, source, confidence, metadata, tags"

#: How a store matches tags: (profile, tags) -> the clauses and their parameters.
TagMatch = Callable[[str, Sequence[str]], list[tuple[str, list[Any]]]]


def memory_filter(
    profile: str, filters: Filters, mark: str, tags: TagMatch, profile_column: str = "profile"
) -> tuple[str, list[Any]]:
    """The ``WHERE`` condition (and its parameters) selecting a profile's memories that
    pass ``filters``: source, tags (all present), event time in ``[after, before)``."""
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
    return " AND ".join(clauses), params


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
