"""The change feed: how anything that keeps what recall reads learns what changed.

Every transaction that changes a profile's memories or what derives from them (memories
written, updated, superseded, forgotten, linked, unlinked; ``slm reindex``; a change of
scope keys) appends one row to ``changes`` in the same transaction: the profile, its next
sequence number, the keys of the memories it wrote and forgot, and whether it wrote the
derived rows of stored memories again. Nothing else writes memories, so a process that has
applied a profile's rows up to sequence number ``s`` knows exactly what to read to be
current: :func:`since` ``(s)``.

Sequence numbers count per profile and are handed out under the profile's write lock
(SQLite has one writer at a time; PostgreSQL's writers take the profile's advisory lock,
store/postgres.py), so they commit in their order: a follower never sees ``s + 1`` before
``s``. That is what lets several processes, and several servers on one PostgreSQL, keep
their own indexes (slm.index) current from the rows alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from slm.store.base import Cursor

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Change:
    """One transaction's change to a profile, as the feed holds it."""

    seq: int
    written: tuple[int, ...] = ()
    forgotten: tuple[int, ...] = ()
    #: the derived rows (passages, terms, entities, edges) of stored memories were written
    #: again, or memories changed in a way no key list says (a change of scope keys)
    rederived: bool = False


@dataclass
class Pending:
    """What the transaction under way has changed so far."""

    written: list[int] = field(default_factory=list)
    forgotten: list[int] = field(default_factory=list)
    rederived: bool = False


class Recorder:
    """Collects, per thread, what the write transaction under way changes, and appends it
    to the feed before it commits (:meth:`wrap`)."""

    def __init__(self, mark: str) -> None:
        self._mark = mark
        self._local = threading.local()

    def wrap(self, profile: str, work: Callable[[Cursor], T]) -> Callable[[Cursor], T]:
        """``work``, then its row of the feed, in the same transaction (a retried
        transaction starts again from nothing)."""

        def fed(cur: Cursor) -> T:
            self._local.pending = Pending()
            self._local.seq = None
            try:
                result = work(cur)
                self._local.seq = append(cur, self._mark, profile, self._local.pending)
            finally:
                self._local.pending = None
            return result

        return fed

    def last(self) -> int | None:
        """The sequence number of this thread's last change (None: it failed)."""
        return getattr(self._local, "seq", None)

    def _pending(self) -> Pending:
        pending = getattr(self._local, "pending", None)
        assert pending is not None, "a change of a profile outside Store.change"
        return pending  # type: ignore[no-any-return]

    def written(self, keys: Iterable[int]) -> None:
        self._pending().written.extend(keys)

    def forgotten(self, keys: Iterable[int]) -> None:
        self._pending().forgotten.extend(keys)

    def rederived(self) -> None:
        self._pending().rederived = True


def _keys(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split())


def append(cur: Cursor, mark: str, profile: str, pending: Pending) -> int:
    """Append ``pending`` as the profile's next change; its sequence number."""
    row = cur.execute(
        f"SELECT coalesce(max(seq), 0) + 1 FROM changes WHERE profile = {mark}", (profile,)
    ).fetchone()
    seq = int(row[0])
    cur.execute(
        "INSERT INTO changes (profile, seq, written, forgotten, rederived) "
        f"VALUES ({', '.join([mark] * 5)})",
        (
            profile,
            seq,
            " ".join(map(str, pending.written)),
            " ".join(map(str, pending.forgotten)),
            int(pending.rederived),
        ),
    )
    return seq


def head(select: Callable[[str, Sequence[Any]], list[Any]], mark: str, profile: str) -> int:
    """The profile's last sequence number (0: nothing changed it yet)."""
    return int(
        select(f"SELECT coalesce(max(seq), 0) FROM changes WHERE profile = {mark}", (profile,))[0][
            0
        ]
    )


def since(
    select: Callable[[str, Sequence[Any]], list[Any]],
    mark: str,
    profile: str,
    seq: int,
    limit: int = 10_000,
) -> list[Change]:
    """The profile's changes after ``seq``, in order (at most ``limit``)."""
    rows = select(
        "SELECT seq, written, forgotten, rederived FROM changes "
        f"WHERE profile = {mark} AND seq > {mark} ORDER BY seq LIMIT {int(limit)}",
        (profile, seq),
    )
    return [Change(int(s), _keys(w), _keys(f), bool(r)) for s, w, f, r in rows]
