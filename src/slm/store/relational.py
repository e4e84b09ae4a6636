"""The store methods written once, in SQL both databases read.

:class:`Relational` is the base of both stores. It holds every method whose SQL is the same
for SQLite and PostgreSQL once the dialect's few differences are named: the driver's
parameter mark, the table of store-wide settings, how a stored tag list reads back, and
the ``+`` SQLite needs before a profile column so that its planner starts from a key's
index instead of the profile's rows. A store supplies three primitives: :meth:`_select`
(rows of one statement), :meth:`_change` (work in one write transaction) and its filter
(:meth:`_where`, since each matches tags its own way). What a database does its own way
(inserting with derived rows, full text, vectors, the graph queries tuned per database)
stays in the store's module.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from slm.models import MemoryRecord, from_micros, to_micros
from slm.store import feedback_rows as feedback
from slm.store import fields, lifecycle, sql
from slm.store.base import FeedbackEvent, Filters, LoggedRecall, Update
from slm.store.lifecycle import Cursor

T = TypeVar("T")


class Relational(ABC):
    """What both stores do alike (see the module docstring)."""

    #: the driver's parameter placeholder
    mark: ClassVar[str]
    #: put before a profile column where a key's index must lead the plan
    by_key: ClassVar[str] = ""
    #: the table of store-wide settings (``set_meta`` and ``meta``)
    meta_table: ClassVar[str]
    #: the most values one ``IN (...)`` list binds
    chunk: ClassVar[int] = 400

    _allowed: fields.AllowedKeys

    # -- what a store supplies ------------------------------------------------------------

    @abstractmethod
    def _select(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one statement."""

    @abstractmethod
    def _change(self, profile: str | None, work: Callable[[Cursor], T]) -> T:
        """``work`` in one write transaction (with ``profile``: holding its write lock where
        the database has one)."""

    @abstractmethod
    def _where(self, profile: str, filters: Filters) -> tuple[str, list[Any]]:
        """The condition selecting the profile's memories that pass ``filters``."""

    @staticmethod
    @abstractmethod
    def _tags(value: Any) -> tuple[str, ...]:
        """A stored tag list as it reads back."""

    # -- helpers --------------------------------------------------------------------------

    def _slices(self, values: Iterable[Any]) -> Iterator[list[Any]]:
        """The distinct ``values`` in slices of at most :attr:`chunk`."""
        distinct = list(dict.fromkeys(values))
        for start in range(0, len(distinct), self.chunk):
            yield distinct[start : start + self.chunk]

    def _select_in(self, head: str, profile: str, values: Iterable[Any]) -> list[Any]:
        """The rows of ``head IN (values)`` for one profile, a slice of values at a time:
        ``head`` is a statement whose first parameter is the profile and which ends with
        the column the values are matched against."""
        rows: list[Any] = []
        for part in self._slices(values):
            marks = ", ".join([self.mark] * len(part))
            rows += self._select(f"{head} IN ({marks})", [profile, *part])
        return rows

    def _record(self, row: Sequence[Any]) -> MemoryRecord:
        key, id_, content, event_time, recorded_at, source, confidence, metadata, tags = row[:9]
        return MemoryRecord(
            id=id_,
            content=content,
            event_time=from_micros(event_time),
            recorded_at=from_micros(recorded_at),
            source=source,
            confidence=confidence,
            metadata=json.loads(metadata),
            tags=self._tags(tags),
            key=key,
            **sql.record_times(row),
        )

    def _memories(self, profile: str, column: str, values: Iterable[Any]) -> list[MemoryRecord]:
        head = (
            f"SELECT {sql.MEMORY_COLUMNS} FROM memories "
            f"WHERE {self.by_key}profile = {self.mark} AND {column}"
        )
        return [self._record(row) for row in self._select_in(head, profile, values)]

    # -- store-wide settings --------------------------------------------------------------

    def set_meta(self, key: str, value: str) -> None:
        statement = (
            f"INSERT INTO {self.meta_table} (key, value) VALUES ({self.mark}, {self.mark}) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )
        self._change(None, lambda cur: cur.execute(statement, (key, value)))

    def meta(self, key: str) -> str | None:
        rows = self._select(f"SELECT value FROM {self.meta_table} WHERE key = {self.mark}", (key,))
        return str(rows[0][0]) if rows else None

    # -- memories -------------------------------------------------------------------------

    def existing(self, profile: str, hashes: Sequence[str]) -> dict[str, str]:
        head = f"SELECT content_hash, id FROM memories WHERE profile = {self.mark} AND content_hash"
        return {str(h): str(i) for h, i in self._select_in(head, profile, hashes)}

    def profiles(self) -> list[str]:
        return [r[0] for r in self._select("SELECT DISTINCT profile FROM memories ORDER BY 1")]

    def profile_summaries(self) -> list[tuple[str, int, int]]:
        return [(str(r[0]), int(r[1]), int(r[2])) for r in self._select(sql.PROFILE_SUMMARIES)]

    def get(self, profile: str, ids: Sequence[str]) -> list[MemoryRecord]:
        by_id = {r.id: r for r in self._memories(profile, "id", ids)}
        return [by_id[i] for i in ids if i in by_id]

    def get_by_keys(self, profile: str, keys: Iterable[int]) -> dict[int, MemoryRecord]:
        return {r.key: r for r in self._memories(profile, "key", keys)}

    def page(self, profile: str, limit: int, offset: int, filters: Filters) -> list[MemoryRecord]:
        where, params = self._where(profile, filters)
        rows = self._select(sql.page_sql(where, self.mark), [*params, limit, offset])
        return [self._record(r) for r in rows]

    def scan(self, profile: str, after_key: int, limit: int) -> list[MemoryRecord]:
        rows = self._select(sql.scan_sql(self.mark), (profile, after_key, limit))
        return [self._record(r) for r in rows]

    def count(self, profile: str, filters: Filters | None = None) -> int:
        where, params = self._where(profile, filters or Filters())
        return int(self._select(sql.count_sql(where), params)[0][0])

    def index_counts(self, profile: str) -> dict[str, int]:
        counts = {}
        for name, table in (
            ("memories", "memories"),
            ("embeddings", "embeddings"),
            ("lexical", "lex_docs"),
        ):
            query = f"SELECT count(*) FROM {table} WHERE profile = {self.mark}"
            counts[name] = int(self._select(query, (profile,))[0][0])
        return counts

    def allowed_keys(self, profile: str, filters: Filters) -> set[int]:
        where = self._where(profile, filters)
        return sql.allowed_keys(self._select, self._allowed, profile, filters, self.mark, *where)

    # -- validity and versions ------------------------------------------------------------

    def superseded(self, profile: str, moment: datetime) -> set[int]:
        rows = self._select(sql.superseded_sql(self.mark), (profile, to_micros(moment)))
        return {r[0] for r in rows}

    def replaced(self, profile: str, newer_id: str) -> list[int]:
        return [r[0] for r in self._select(lifecycle.replaced_sql(self.mark), (profile, newer_id))]

    def supersede(
        self, profile: str, newer_id: str, older_ids: Sequence[str], moment: datetime
    ) -> None:
        at = to_micros(moment)
        self._change(
            profile,
            lambda cur: lifecycle.supersede(cur, self.mark, profile, newer_id, older_ids, at),
        )

    def dismiss(self, profile: str, older_id: str, newer_id: str) -> bool:
        return self._change(
            profile, lambda cur: lifecycle.dismiss(cur, self.mark, profile, older_id, newer_id)
        )

    def updates(self, profile: str, keys: Sequence[int]) -> list[Update]:
        found: list[Update] = []
        for part in self._slices(keys):
            rows = self._select(
                lifecycle.updates_sql(self.mark, len(part), by_key=self.by_key),
                [*part, profile, *part, profile, *part, profile],
            )
            found.extend(lifecycle.read_updates(rows))
        return list(dict.fromkeys(found))

    def update_count(self, profile: str) -> int:
        return int(self._select(sql.update_count_sql(self.mark), (profile,))[0][0])

    def stating(self, profile: str, slots: Sequence[str]) -> set[int]:
        if not slots:
            return set()
        rows = self._select(sql.stating_sql(self.mark, len(slots)), (profile, *slots))
        return {r[0] for r in rows}

    def has_versions(self, profile: str) -> bool:
        return bool(self._select(sql.has_versions_sql(self.mark), (profile, profile))[0][0])

    # -- feedback and the recall log ------------------------------------------------------

    def source_feedback(self, profile: str, sources: Iterable[str]) -> dict[str, tuple[int, int]]:
        head = (
            "SELECT source, useful, not_useful FROM source_feedback "
            f"WHERE profile = {self.mark} AND source"
        )
        return {s: (u, n) for s, u, n in self._select_in(head, profile, sources)}

    def add_feedback(
        self, profile: str, source: str, useful: bool, event: FeedbackEvent | None = None
    ) -> None:
        def work(cur: Cursor) -> None:
            if event is None:
                feedback.count_source(cur, self.mark, profile, source, useful)
            else:
                feedback.add_event(cur, self.mark, profile, event, source)

        self._change(None, work)

    def feedback_events(
        self, profile: str, limit: int, offset: int = 0, *, labelled_only: bool = False
    ) -> list[FeedbackEvent]:
        rows = self._select(feedback.events_sql(self.mark, labelled_only), (profile, limit, offset))
        return [feedback.read_event(r) for r in rows]

    def reset_feedback(self, profile: str) -> int:
        return self._change(None, lambda cur: feedback.reset(cur, self.mark, profile))

    def feedback_marks(
        self, profile: str, memory_ids: Sequence[str], before: int | None = None
    ) -> dict[str, tuple[int, int]]:
        if not memory_ids:
            return {}
        query = feedback.marks_query(self.mark, profile, memory_ids, before)
        return feedback.read_marks(self._select(*query))

    def feedback_asked(
        self, profile: str, memory_ids: Sequence[str]
    ) -> dict[str, list[tuple[bool, str]]]:
        if not memory_ids:
            return {}
        query = feedback.asked_query(self.mark, profile, memory_ids)
        return feedback.read_asked(self._select(*query))

    def log_recall(self, profile: str, entry: LoggedRecall) -> None:
        self._change(None, lambda cur: feedback.log_recall(cur, self.mark, profile, entry))

    def logged_recalls(self, profile: str, query_ids: Sequence[str]) -> dict[str, LoggedRecall]:
        rows = self._select_in(feedback.logged_head(self.mark), profile, query_ids)
        return {r.query_id: r for r in map(feedback.read_logged, rows)}

    def keep_example(self, profile: str, query_id: str, example: bytes) -> None:
        self._change(
            None,
            lambda cur: feedback.keep_example(cur, self.mark, profile, query_id, example),
        )
