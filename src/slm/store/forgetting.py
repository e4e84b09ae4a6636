"""Forgetting memories, in the SQL both dialects read: which rows go (the memories named by
id, or every one a filter admits) and their removal with every row derived from them
(lexical, passages, entities and times, graph edges, facts and probable updates, the
metadata index, vectors), the change feed told, in the caller's write transaction."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from slm.store import derived, feed, fields, lifecycle
from slm.store.base import Cursor, Filters
from slm.store.dialect import Dialect

#: The rows a removal reads: each memory's key, id and lexical terms.
_ROWS = "SELECT m.key, m.id, d.terms FROM memories m LEFT JOIN lex_docs d ON d.key = m.key WHERE "


def by_ids(cur: Cursor, dialect: Dialect, profile: str, ids: Sequence[str]) -> list[Any]:
    """The rows of the memories of ``profile`` among ``ids``."""
    head = f"{_ROWS}{dialect.by_key}m.profile = {dialect.mark} AND m.id"
    return list(dialect.rows_in(cur, head, [profile], ids))


def matching(dialect: Dialect, profile: str, filters: Filters) -> tuple[str, list[Any]]:
    """The statement reading the rows of the memories ``filters`` admit, and its
    parameters."""
    where, params = dialect.where(profile, filters)
    return f"{_ROWS}m.key IN (SELECT key FROM memories WHERE {where})", params


def remove(
    cur: Cursor,
    dialect: Dialect,
    profile: str,
    found: Iterable[Sequence[Any]],
    vectors: Callable[[Cursor, str, Sequence[int]], None],
    recorder: feed.Recorder,
) -> list[str]:
    """Remove the memories of ``found`` (rows as :func:`by_ids` reads them) and every row
    derived from them (``vectors`` removes their vectors); their ids, in key order."""
    mark = dialect.mark
    rows = sorted((int(key), str(id_), terms) for key, id_, terms in found)
    for key, _, terms in rows:
        words = terms.split() if terms is not None else None
        derived.delete(cur, dialect, profile, key, words)
        lifecycle.delete_facts(cur, mark, profile, key)
        fields.delete(cur, mark, key)
    keys = [key for key, _, _ in rows]
    derived.delete_passages(cur, dialect, keys)
    vectors(cur, profile, keys)
    recorder.forgotten(keys)
    for part in dialect.slices(keys):
        among, values = dialect.among("key", part)
        cur.execute(f"DELETE FROM memories WHERE {among}", values)
    for _, id_, _ in rows:
        lifecycle.reinstate(cur, mark, profile, id_)
    return [id_ for _, id_, _ in rows]
