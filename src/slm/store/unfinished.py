"""The memories a write of several parts created and may still take away: a conversation
or an import too large for one transaction is written in parts, and a part that fails takes
the earlier parts' memories away (:class:`slm.ingest.stage.AllOrNothing`). Meanwhile
another write may store the same text and be told it is already stored (``created:
false``): that memory is then the other writer's too, and must stay.

A part marks each memory it creates with a row of ``unfinished`` (profile, id), in the
transaction that creates it. A write told that a memory exists reads whether it is marked;
if so it claims it, deleting the mark in a transaction that holds the profile's write lock
and finds the memory still there. The rollback, in one transaction under the same lock,
takes away only those of its memories still marked; a write of parts that succeeds deletes
its marks. A mark exists only from the commit that created its memory, and a claim and a
rollback exclude each other, so a memory anyone was told exists is never taken away, and a
rollback leaves nothing no one was given: between threads, processes and servers, on both
stores. A process killed half-way leaves its marks (the write is resumable: storing the same
again is told those memories exist and claims them).
"""

from __future__ import annotations

from collections.abc import Sequence

from slm.store.base import Cursor
from slm.store.dialect import Dialect

_SELECT = "SELECT id FROM unfinished WHERE profile = {mark} AND id"


def mark(cur: Cursor, dialect: Dialect, profile: str, ids: Sequence[str]) -> None:
    """Mark ``ids``, just created by a part of an unfinished write."""
    if ids:
        m = dialect.mark
        cur.executemany(
            f"INSERT INTO unfinished (profile, id) VALUES ({m}, {m}) ON CONFLICT DO NOTHING",
            [(profile, id_) for id_ in ids],
        )


def marked(cur: Cursor, dialect: Dialect, profile: str, ids: Sequence[str]) -> set[str]:
    """Those of ``ids`` still marked."""
    head = _SELECT.format(mark=dialect.mark)
    return {str(id_) for (id_,) in dialect.rows_in(cur, head, [profile], ids)}


def clear(cur: Cursor, dialect: Dialect, profile: str, ids: Sequence[str]) -> None:
    """Remove the marks of ``ids`` (claimed, finished, or taken away)."""
    for part in dialect.slices(ids):
        among, values = dialect.among("id", part)
        cur.execute(f"DELETE FROM unfinished WHERE profile = {dialect.mark} AND {among}",
                    [profile, *values])  # fmt: skip
