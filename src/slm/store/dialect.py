"""What differs between the SQL of the two databases, named in one place.

The store is written once (:mod:`slm.store.relational`, :mod:`slm.store.derived`) over a
:class:`Dialect`: the driver's parameter mark, how one statement inserts many rows, how a
vector is bound and a tag list read back, how tags are matched, and the few queries each
database answers faster its own way (the entities a name finds, the turn before a memory,
a term's postings, the memories of a time window). A new database is a dialect.

Every function here takes an open cursor: an ``sqlite3`` connection or a psycopg cursor,
whose ``execute`` returns something to ``fetchall`` from.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

from slm.models import NewMemory
from slm.store.base import Cursor, Filters, Postings
from slm.store.readcache import ReadCache

T = TypeVar("T")
#: rows of values to insert
Rows = Sequence[tuple[Any, ...]]

#: Memories without a session are neighbouring turns when from one named source this close
#: in time.
SESSION_GAP_US = 30 * 60 * 1_000_000
#: Referenced-date spans longer than this are not searched by start (see ``time_overlaps``).
MAX_SPAN_US = 2 * 366 * 86_400 * 1_000_000
#: Spans up to this long (a day, a week, a month) are found by start within this distance
#: of a window; longer ones through their own partial index (``memory_times_long``), so a
#: window query never walks two years of short spans.
SHORT_SPAN_US = 62 * 86_400 * 1_000_000
#: The partial index's condition, written out so that the planner can match it.
LONG_SPAN = f"end_us - start_us > {SHORT_SPAN_US}"


def mentioned(
    fresh: Sequence[tuple[int, NewMemory]],
) -> tuple[dict[str, str], dict[tuple[str, int], int]]:
    """The entities new memories mention, each with its kind, and each (entity, memory key)
    with its speaker flag (1: the entity speaks in the memory), the first mention's each."""
    kinds: dict[str, str] = {}
    speaker: dict[tuple[str, int], int] = {}
    for key, memory in fresh:
        for name, kind, speaks in memory.entities:
            kinds.setdefault(name, kind)
            speaker.setdefault((name, key), int(speaks))
    return kinds, speaker


class Dialect(ABC):
    """One database's SQL where it is not the other's."""

    #: the database's name, which selects its part of the schema (:mod:`slm.store.schema`)
    name: ClassVar[str]
    #: the driver's parameter placeholder
    mark: ClassVar[str]
    #: put before a profile column where a key's index must lead the plan
    by_key: ClassVar[str] = ""
    #: the table of store-wide settings
    meta_table: ClassVar[str]
    #: the most values one ``IN (...)`` list binds
    chunk: ClassVar[int]

    def slices(self, values: Iterable[Any]) -> Iterator[list[Any]]:
        """The distinct ``values`` in slices of at most :attr:`chunk`."""
        distinct = list(dict.fromkeys(values))
        for start in range(0, len(distinct), self.chunk):
            yield distinct[start : start + self.chunk]

    def among(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """The condition ``column`` is one of ``values`` (at most :attr:`chunk` of them),
        and its parameters."""
        return f"{column} IN ({', '.join([self.mark] * len(values))})", list(values)

    def rows_in(
        self, cur: Cursor, head: str, params: Sequence[Any], values: Iterable[Any]
    ) -> list[Any]:
        """The rows of ``head`` matching its last column against ``values`` (:meth:`among`),
        a slice of values at a time: ``head`` ends with that column, after its own
        ``params``."""
        rows: list[Any] = []
        for part in self.slices(values):
            condition, bound = self.among(head, part)
            rows += cur.execute(condition, [*params, *bound]).fetchall()
        return rows

    @abstractmethod
    def many(
        self, cur: Cursor, head: str, rows: Rows, types: Sequence[str], tail: str = ""
    ) -> None:
        """Insert ``rows`` with ``head`` (``INSERT INTO table (columns)``), their columns of
        the SQL ``types``, then ``tail`` (an ``ON CONFLICT`` clause), in as few round trips
        as the database allows."""

    @abstractmethod
    def vector(self, blob: bytes) -> Any:
        """A stored vector (little-endian float32 bytes) as the driver binds it."""

    @abstractmethod
    def tags(self, value: Any) -> tuple[str, ...]:
        """A stored tag list as it reads back."""

    @abstractmethod
    def where(self, profile: str, filters: Filters) -> tuple[str, list[Any]]:
        """The condition selecting the profile's memories that pass ``filters``."""

    # -- the queries each database answers its own way ------------------------------------

    @abstractmethod
    def insert_mentions(
        self, cur: Cursor, profile: str, fresh: Sequence[tuple[int, NewMemory]]
    ) -> None:
        """Entities (the first mention's kind wins), one mention row per entity and memory
        (the first mention's speaker flag wins), and the entities' mention counts."""

    @abstractmethod
    def previous_turns(
        self, cur: Cursor, profile: str, fresh: Sequence[tuple[int, NewMemory]]
    ) -> dict[int, int]:
        """The turn before each new memory: the last earlier memory of its session or,
        without a session, of its source when at most ``SESSION_GAP_US`` apart."""

    @abstractmethod
    def find_entities(
        self, cur: Cursor, profile: str, names: Sequence[str]
    ) -> dict[str, list[tuple[int, str, int]]]:
        """See :meth:`slm.store.base.Graph.find_entities`."""

    @abstractmethod
    def entity_members(
        self, cur: Cursor, profile: str, entities: Sequence[int], limit: int
    ) -> dict[int, list[int]]:
        """See :meth:`slm.store.base.Graph.entity_members`."""

    @abstractmethod
    def speakers(self, cur: Cursor, profile: str, entities: Sequence[int]) -> set[int]:
        """See :meth:`slm.store.base.Graph.speakers`."""

    @abstractmethod
    def postings(
        self, cur: Cursor, profile: str, terms: Sequence[str], limit: int
    ) -> dict[str, Postings]:
        """See :meth:`slm.store.base.Lexical.postings`."""

    def time_overlaps(
        self, cur: Cursor, profile: str, start: int, end: int, limit: int
    ) -> dict[int, tuple[int, int]] | None:
        """See :meth:`slm.store.base.Graph.time_overlaps`: the event times in the window,
        counted by the database first, then the referenced dates overlapping it, in two
        index ranges (short spans near the window, long ones through their partial index)."""
        m = self.mark
        (events,) = cur.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM memories WHERE profile = {m} "
            f"AND event_time >= {m} AND event_time < {m} LIMIT {m}) AS crowd",
            (profile, start, end, limit + 1),
        ).fetchone()
        if events > limit:
            return None
        rows = cur.execute(
            f"SELECT key, event_time FROM memories WHERE profile = {m} AND event_time >= {m} "
            f"AND event_time < {m} ORDER BY event_time, key LIMIT {m}",
            (profile, start, end, limit),
        ).fetchall()
        found: dict[int, tuple[int, int]] = {key: (moment, moment) for key, moment in rows}
        spans: set[tuple[int, int, int]] = set()
        for lookback, longer in ((SHORT_SPAN_US, ""), (MAX_SPAN_US, f" AND {LONG_SPAN}")):
            spans.update(
                cur.execute(
                    f"SELECT key, start_us, end_us FROM memory_times WHERE profile = {m} "
                    f"AND start_us < {m} AND start_us > {m} AND end_us > {m}{longer} "
                    f"ORDER BY start_us, key LIMIT {m}",
                    (profile, end, start - lookback, start, limit + 1),
                ).fetchall()
            )
        for key, span_start, span_end in sorted(spans, key=lambda r: (r[1], r[0], r[2]))[
            : limit + 1
        ]:
            found.setdefault(key, (span_start, span_end))
        return found if len(found) <= limit else None


class Reads(Protocol):
    """What code outside a relational store (:class:`slm.store.relational.Relational`)
    reads it by: its dialect, and statements run over its connection."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def mark(self) -> str: ...

    def select(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one statement."""

    def select_in(self, head: str, profile: str, values: Iterable[Any]) -> list[Any]:
        """The rows of ``head IN (values)`` for one profile (:meth:`Dialect.rows_in`)."""


class Database(Reads, Protocol):
    """What the SQL both stores share outside the store itself (versions, feedback) asks of
    a store: besides what it reads by, its read cache and its write transactions."""

    @property
    def cache(self) -> ReadCache: ...

    def change(
        self, profile: str | None, work: Callable[[Cursor], T], *, lasting: bool = True
    ) -> T:
        """``work`` in one write transaction (:meth:`slm.store.relational.Relational.change`)."""
