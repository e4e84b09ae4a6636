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

Which write is one of several parts is said by :func:`writing_in_parts`, around it in the
thread (or task) that makes it: its parts' inserts mark what they create, and what it
created so far is its own, never claimed from itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

from slm.store import forgetting
from slm.store.base import Cursor
from slm.store.dialect import Dialect

T = TypeVar("T")

#: While a write of several parts runs in this thread or task: the ids its parts created.
_CURRENT: ContextVar[set[str] | None] = ContextVar("slm_write_in_parts", default=None)


@contextmanager
def writing_in_parts() -> Iterator[set[str]]:
    """Around a write of several parts: its inserts mark what they create; the set it
    gives is what the write counts as its own (it adds each part's created ids)."""
    created: set[str] = set()
    token = _CURRENT.set(created)
    try:
        yield created
    finally:
        _CURRENT.reset(token)


def own() -> set[str]:
    """What the write of several parts running here created so far (empty: none runs)."""
    created = _CURRENT.get()
    return created if created is not None else set()


def mark(cur: Cursor, dialect: Dialect, profile: str, ids: Sequence[str]) -> None:
    """Mark ``ids``, just created, when a write of several parts runs here."""
    if ids and _CURRENT.get() is not None:
        m = dialect.mark
        cur.executemany(
            f"INSERT INTO unfinished (profile, id) VALUES ({m}, {m}) ON CONFLICT DO NOTHING",
            [(profile, id_) for id_ in ids],
        )


def marked(cur: Cursor, dialect: Dialect, profile: str, ids: Sequence[str]) -> set[str]:
    """Those of ``ids`` still marked."""
    head = f"SELECT id FROM unfinished WHERE profile = {dialect.mark} AND id"
    return {str(id_) for (id_,) in dialect.rows_in(cur, head, [profile], ids)}


def clear(cur: Cursor, dialect: Dialect, profile: str, ids: Sequence[str]) -> None:
    """Remove the marks of ``ids`` (claimed, finished, or taken away)."""
    for part in dialect.slices(ids):
        among, values = dialect.among("id", part)
        cur.execute(f"DELETE FROM unfinished WHERE profile = {dialect.mark} AND {among}",
                    [profile, *values])  # fmt: skip


class _Host(Protocol):
    """What :class:`Unfinished` needs of the relational store it is part of."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def mark(self) -> str: ...

    def select_in(self, head: str, profile: str, values: Sequence[Any]) -> list[Any]: ...

    def change(self, profile: str | None, work: Callable[[Cursor], T]) -> T: ...

    def _commit(self, profile: str | None, work: Callable[[Cursor], T], lasting: bool) -> T: ...

    def _remove(self, cur: Cursor, profile: str, rows: Iterable[Sequence[Any]]) -> list[str]: ...


class Unfinished:
    """The store's side of writes of several parts (:class:`slm.store.base.Rows`):
    ``told``, ``claim``, ``finish``, ``take_back``, for the relational stores."""

    def told(self: _Host, profile: str, ids: Sequence[str]) -> dict[str, bool]:
        head = (
            "SELECT m.id, EXISTS (SELECT 1 FROM unfinished u WHERE u.profile = m.profile "
            f"AND u.id = m.id) FROM memories m WHERE m.profile = {self.mark} AND m.id"
        )
        return {str(id_): bool(held) for id_, held in self.select_in(head, profile, ids)}

    def claim(self: _Host, profile: str, ids: Sequence[str]) -> set[str]:
        def work(cur: Cursor) -> set[str]:
            clear(cur, self.dialect, profile, ids)
            head = f"SELECT id FROM memories WHERE profile = {self.mark} AND id"
            return {str(i) for (i,) in self.dialect.rows_in(cur, head, [profile], ids)}

        return self._commit(profile, work, True)  # under the write lock; the feed unmoved

    def finish(self: _Host, profile: str, ids: Sequence[str]) -> None:
        self._commit(profile, lambda cur: clear(cur, self.dialect, profile, ids), True)

    def take_back(self: _Host, profile: str, ids: Sequence[str]) -> list[str]:
        def work(cur: Cursor) -> list[str]:
            mine = sorted(marked(cur, self.dialect, profile, ids))
            clear(cur, self.dialect, profile, mine)
            return self._remove(cur, profile, forgetting.by_ids(cur, self.dialect, profile, mine))

        return self.change(profile, work)
