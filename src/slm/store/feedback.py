"""The rows of learning from use, in SQL both dialects read: the recall log (what each
``query_id`` asked and was shown, and once labelled the features of its window) and the
feedback events. Both stores call these with an open cursor of one transaction and their
parameter mark (``?`` or ``%s``), as ``slm.store.lifecycle`` does.

Both tables are bounded per profile: the log keeps the newest :data:`MAX_LOGGED` recalls
(and every recall feedback names), the feedback the newest :data:`MAX_FEEDBACK` events.
Older rows are pruned every :data:`PRUNE_EVERY` writes.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from typing import Any, TypeVar

from slm.store.base import FeedbackEvent, LoggedRecall
from slm.store.lifecycle import Cursor

MAX_LOGGED = 10_000
MAX_FEEDBACK = 100_000
PRUNE_EVERY = 64

T = TypeVar("T")


def log_recall(cur: Cursor, mark: str, profile: str, entry: LoggedRecall) -> None:
    cur.execute(
        f"INSERT INTO recall_log (profile, query_id, created_at, request, shown) "
        f"VALUES ({mark}, {mark}, {mark}, {mark}, {mark})",
        [profile, entry.query_id, entry.created_at, entry.request, entry.shown],
    )
    if zlib.crc32(entry.query_id.encode()) % PRUNE_EVERY == 0:
        cur.execute(
            f"DELETE FROM recall_log WHERE profile = {mark} AND created_at < ("
            f"SELECT created_at FROM recall_log WHERE profile = {mark} "
            f"ORDER BY created_at DESC LIMIT 1 OFFSET {MAX_LOGGED}) "
            f"AND query_id NOT IN (SELECT query_id FROM feedback WHERE profile = {mark} "
            "AND query_id IS NOT NULL)",
            [profile, profile, profile],
        )


def logged_head(mark: str) -> str:
    """The logged recalls of a profile whose ``query_id`` is in a list (the list follows)."""
    return (
        "SELECT query_id, created_at, request, shown, example FROM recall_log "
        f"WHERE profile = {mark} AND query_id"
    )


def read_logged(row: Sequence[Any]) -> LoggedRecall:
    example = row[4]
    return LoggedRecall(
        row[0], int(row[1]), str(row[2]), str(row[3]), bytes(example) if example else None
    )


def keep_example(cur: Cursor, mark: str, profile: str, query_id: str, example: bytes) -> None:
    cur.execute(
        f"UPDATE recall_log SET example = {mark} WHERE profile = {mark} AND query_id = {mark}",
        [example, profile, query_id],
    )


def count_source(cur: Cursor, mark: str, profile: str, source: str, useful: bool) -> None:
    column = "useful" if useful else "not_useful"
    cur.execute(
        f"INSERT INTO source_feedback (profile, source, {column}) VALUES ({mark}, {mark}, 1) "
        f"ON CONFLICT (profile, source) DO UPDATE "
        f"SET {column} = source_feedback.{column} + 1",
        [profile, source],
    )


def add_event(cur: Cursor, mark: str, profile: str, event: FeedbackEvent, source: str) -> None:
    """Record one event and count it toward ``source``'s trust. A later label on the same
    recall and memory replaces the earlier one, in the trust counts too."""
    if event.query_id is not None:
        earlier = cur.execute(
            f"SELECT useful FROM feedback WHERE profile = {mark} AND query_id = {mark} "
            f"AND memory_id = {mark}",
            [profile, event.query_id, event.memory_id],
        ).fetchall()
        for (useful,) in earlier:
            column = "useful" if useful else "not_useful"
            cur.execute(
                f"UPDATE source_feedback SET {column} = {column} - 1 "
                f"WHERE profile = {mark} AND source = {mark} AND {column} > 0",
                [profile, source],
            )
        cur.execute(
            f"DELETE FROM feedback WHERE profile = {mark} AND query_id = {mark} "
            f"AND memory_id = {mark}",
            [profile, event.query_id, event.memory_id],
        )
    count_source(cur, mark, profile, source, event.useful)
    cur.execute(
        f"INSERT INTO feedback (profile, query_id, memory_id, useful, created_at) "
        f"VALUES ({mark}, {mark}, {mark}, {mark}, {mark})",
        [profile, event.query_id, event.memory_id, 1 if event.useful else 0, event.created_at],
    )
    if event.created_at % PRUNE_EVERY == 0:
        cur.execute(
            f"DELETE FROM feedback WHERE profile = {mark} AND seq < ("
            f"SELECT seq FROM feedback WHERE profile = {mark} "
            f"ORDER BY seq DESC LIMIT 1 OFFSET {MAX_FEEDBACK - 1})",
            [profile, profile],
        )


def events_sql(mark: str, labelled_only: bool) -> str:
    where = " AND query_id IS NOT NULL" if labelled_only else ""
    return (
        "SELECT seq, query_id, memory_id, useful, created_at FROM feedback "
        f"WHERE profile = {mark}{where} ORDER BY seq DESC LIMIT {mark} OFFSET {mark}"
    )


def read_event(row: Sequence[Any]) -> FeedbackEvent:
    return FeedbackEvent(
        memory_id=str(row[2]),
        useful=bool(row[3]),
        query_id=row[1],
        created_at=int(row[4]),
        seq=int(row[0]),
    )


def marks_query(
    mark: str, profile: str, memory_ids: Sequence[str], before: int | None
) -> tuple[str, list[Any]]:
    """The statement and parameters counting (useful, not useful) labelled feedback per
    memory id, only that given before ``before`` (microseconds) when given."""
    marks = ", ".join([mark] * len(memory_ids))
    other = f" AND created_at < {mark}" if before is not None else ""
    sql = (
        "SELECT memory_id, sum(useful), sum(1 - useful) FROM feedback "
        f"WHERE profile = {mark} AND memory_id IN ({marks}) AND query_id IS NOT NULL{other} "
        "GROUP BY memory_id"
    )
    return sql, [profile, *memory_ids, *([before] if before is not None else [])]


#: At most this many of the newest labels are read per recall for the feedback step.
ASKED_LIMIT = 2000


def asked_query(mark: str, profile: str, memory_ids: Sequence[str]) -> tuple[str, list[Any]]:
    """The statement and parameters reading, newest first, the labels given to
    ``memory_ids`` for a logged recall, each with that recall's request."""
    marks = ", ".join([mark] * len(memory_ids))
    sql = (
        "SELECT f.memory_id, f.useful, r.request FROM feedback f JOIN recall_log r "
        "ON r.profile = f.profile AND r.query_id = f.query_id "
        f"WHERE f.profile = {mark} AND f.memory_id IN ({marks}) "
        f"ORDER BY f.seq DESC LIMIT {ASKED_LIMIT}"
    )
    return sql, [profile, *memory_ids]


def read_asked(rows: Sequence[Sequence[Any]]) -> dict[str, list[tuple[bool, str]]]:
    """(useful, the question asked) per memory id, from :func:`asked_query`'s rows."""
    out: dict[str, list[tuple[bool, str]]] = {}
    for memory_id, useful, request in rows:
        try:
            question = str(json.loads(request).get("query", ""))
        except (ValueError, AttributeError):
            continue
        out.setdefault(str(memory_id), []).append((bool(useful), question))
    return out


def read_marks(rows: Sequence[Sequence[Any]]) -> dict[str, tuple[int, int]]:
    return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}


def reset(cur: Cursor, mark: str, profile: str) -> int:
    """Erase a profile's feedback, its recall log and its sources' trust counts; returns
    how many feedback events there were."""
    count = int(
        cur.execute(f"SELECT count(*) FROM feedback WHERE profile = {mark}", [profile]).fetchone()[
            0
        ]
    )
    for table in ("feedback", "recall_log", "source_feedback"):
        cur.execute(f"DELETE FROM {table} WHERE profile = {mark}", [profile])
    return count
