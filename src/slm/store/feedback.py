"""Learning from use, written once for both stores: the recall log (what each ``query_id``
asked and was shown, and once labelled the features of its window), the feedback events, and
each source's trust counts. A store reaches it as ``store.feedback``.

Both tables are bounded per profile: the log keeps the newest :data:`MAX_LOGGED` recalls
(and every recall feedback names), the feedback the newest :data:`MAX_FEEDBACK` events.
Older rows are pruned every :data:`PRUNE_EVERY` writes.

The log is written after recalls, in batches when they pause, by a thread of its own
(``slm.learn.logwriter``), and committed without waiting for the disk: a power cut, or a
process killed before it closes its store, can lose the last recalls logged (their
``query_id`` then names nothing, and feedback on them says so), never a memory or a
feedback event. Waiting for the disk held the store's connection for the next recall to
wait on: 0.6 ms of a 7.7 ms recall, back to back on a LoCoMo conversation.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable, Sequence

from slm.store.base import Cursor, FeedbackEvent, LoggedRecall
from slm.store.dialect import Database

MAX_LOGGED = 10_000
MAX_FEEDBACK = 100_000
PRUNE_EVERY = 64
#: At most this many of the newest labels are read per recall for the feedback step.
ASKED_LIMIT = 2000


class RelationalFeedback:
    """The :class:`~slm.store.base.FeedbackLog` of a relational store, in the SQL both
    dialects read."""

    def __init__(self, store: Database) -> None:
        self._store = store
        self._mark = store.mark

    def trust(self, profile: str, sources: Iterable[str]) -> dict[str, tuple[int, int]]:
        head = (
            "SELECT source, useful, not_useful FROM source_feedback "
            f"WHERE profile = {self._mark} AND source"
        )
        return {s: (u, n) for s, u, n in self._store.select_in(head, profile, sources)}

    def add(
        self, profile: str, source: str, useful: bool, event: FeedbackEvent | None = None
    ) -> None:
        def work(cur: Cursor) -> None:
            if event is not None:
                self._add_event(cur, profile, event, source)
            else:
                self._count_source(cur, profile, source, useful)

        self._store.change(None, work)

    def events(
        self, profile: str, limit: int, offset: int = 0, *, labelled_only: bool = False
    ) -> list[FeedbackEvent]:
        m = self._mark
        where = " AND query_id IS NOT NULL" if labelled_only else ""
        rows = self._store.select(
            "SELECT seq, query_id, memory_id, useful, created_at FROM feedback "
            f"WHERE profile = {m}{where} ORDER BY seq DESC LIMIT {m} OFFSET {m}",
            (profile, limit, offset),
        )
        return [
            FeedbackEvent(str(r[2]), bool(r[3]), r[1], created_at=int(r[4]), seq=int(r[0]))
            for r in rows
        ]

    def marks(
        self, profile: str, memory_ids: Sequence[str], before: int | None = None
    ) -> dict[str, tuple[int, int]]:
        if not memory_ids:
            return {}
        m = self._mark
        among, values = self._store.dialect.among("memory_id", memory_ids)
        other = f" AND created_at < {m}" if before is not None else ""
        rows = self._store.select(
            "SELECT memory_id, sum(useful), sum(1 - useful) FROM feedback "
            f"WHERE profile = {m} AND {among} AND query_id IS NOT NULL{other} "
            "GROUP BY memory_id",
            [profile, *values, *([before] if before is not None else [])],
        )
        return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}

    def asked(self, profile: str, memory_ids: Sequence[str]) -> dict[str, list[tuple[bool, str]]]:
        if not memory_ids:
            return {}
        m = self._mark
        among, values = self._store.dialect.among("f.memory_id", memory_ids)
        rows = self._store.select(
            "SELECT f.memory_id, f.useful, r.request FROM feedback f JOIN recall_log r "
            "ON r.profile = f.profile AND r.query_id = f.query_id "
            f"WHERE f.profile = {m} AND {among} "
            f"ORDER BY f.seq DESC LIMIT {ASKED_LIMIT}",
            [profile, *values],
        )
        out: dict[str, list[tuple[bool, str]]] = {}
        for memory_id, useful, request in rows:
            try:
                question = str(json.loads(request).get("query", ""))
            except (ValueError, AttributeError):
                continue
            out.setdefault(str(memory_id), []).append((bool(useful), question))
        return out

    def reset(self, profile: str) -> int:
        def work(cur: Cursor) -> int:
            m = self._mark
            found = cur.execute(f"SELECT count(*) FROM feedback WHERE profile = {m}", [profile])
            count = int(found.fetchone()[0])
            for table in ("feedback", "recall_log", "source_feedback"):
                cur.execute(f"DELETE FROM {table} WHERE profile = {m}", [profile])
            return count

        return self._store.change(None, work)

    def log(self, profile: str, entries: Sequence[LoggedRecall]) -> None:
        def work(cur: Cursor) -> None:
            m = self._mark
            for entry in entries:
                cur.execute(
                    f"INSERT INTO recall_log (profile, query_id, created_at, request, shown) "
                    f"VALUES ({m}, {m}, {m}, {m}, {m})",
                    [profile, entry.query_id, entry.created_at, entry.request, entry.shown],
                )
            if any(zlib.crc32(e.query_id.encode()) % PRUNE_EVERY == 0 for e in entries):
                cur.execute(
                    f"DELETE FROM recall_log WHERE profile = {m} AND created_at < ("
                    f"SELECT created_at FROM recall_log WHERE profile = {m} "
                    f"ORDER BY created_at DESC LIMIT 1 OFFSET {MAX_LOGGED}) "
                    f"AND query_id NOT IN (SELECT query_id FROM feedback WHERE profile = {m} "
                    "AND query_id IS NOT NULL)",
                    [profile, profile, profile],
                )

        if not entries:
            return
        # Written after recalls: not worth a wait for the disk (the module's note).
        self._store.change(None, work, lasting=False)

    def logged(self, profile: str, query_ids: Sequence[str]) -> dict[str, LoggedRecall]:
        head = (
            "SELECT query_id, created_at, request, shown, example FROM recall_log "
            f"WHERE profile = {self._mark} AND query_id"
        )
        rows = self._store.select_in(head, profile, query_ids)
        return {
            str(r[0]): LoggedRecall(
                str(r[0]), int(r[1]), str(r[2]), str(r[3]), bytes(r[4]) if r[4] else None
            )
            for r in rows
        }

    def keep_example(self, profile: str, query_id: str, example: bytes) -> None:
        m = self._mark
        self._store.change(
            None,
            lambda cur: cur.execute(
                f"UPDATE recall_log SET example = {m} WHERE profile = {m} AND query_id = {m}",
                [example, profile, query_id],
            ),
        )

    def _count_source(self, cur: Cursor, profile: str, source: str, useful: bool) -> None:
        column = "useful" if useful else "not_useful"
        m = self._mark
        cur.execute(
            f"INSERT INTO source_feedback (profile, source, {column}) VALUES ({m}, {m}, 1) "
            f"ON CONFLICT (profile, source) DO UPDATE "
            f"SET {column} = source_feedback.{column} + 1",
            [profile, source],
        )

    def _add_event(self, cur: Cursor, profile: str, event: FeedbackEvent, source: str) -> None:
        """Record one event and count it toward ``source``'s trust. A later label on the
        same recall and memory replaces the earlier one, in the trust counts too."""
        m = self._mark
        if event.query_id is not None:
            earlier = cur.execute(
                f"SELECT useful FROM feedback WHERE profile = {m} AND query_id = {m} "
                f"AND memory_id = {m}",
                [profile, event.query_id, event.memory_id],
            ).fetchall()
            for (useful,) in earlier:
                column = "useful" if useful else "not_useful"
                cur.execute(
                    f"UPDATE source_feedback SET {column} = {column} - 1 "
                    f"WHERE profile = {m} AND source = {m} AND {column} > 0",
                    [profile, source],
                )
            cur.execute(
                f"DELETE FROM feedback WHERE profile = {m} AND query_id = {m} AND memory_id = {m}",
                [profile, event.query_id, event.memory_id],
            )
        self._count_source(cur, profile, source, event.useful)
        cur.execute(
            f"INSERT INTO feedback (profile, query_id, memory_id, useful, created_at) "
            f"VALUES ({m}, {m}, {m}, {m}, {m})",
            [profile, event.query_id, event.memory_id, 1 if event.useful else 0, event.created_at],
        )
        if event.created_at % PRUNE_EVERY == 0:
            cur.execute(
                f"DELETE FROM feedback WHERE profile = {m} AND seq < ("
                f"SELECT seq FROM feedback WHERE profile = {m} "
                f"ORDER BY seq DESC LIMIT 1 OFFSET {MAX_FEEDBACK - 1})",
                [profile, profile],
            )
