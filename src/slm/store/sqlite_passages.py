"""The ``passages`` rows of the SQLite store: a memory's further passages and its standing
statements, written and read inside the store's transactions (see
:data:`slm.store.base.PASSAGE_SPAN` for their keys)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from slm.models import NewMemory
from slm.store.base import PASSAGE_SPAN, STANDING_BASE
from slm.store.sqlite_conn import chunks, marks


def passage_rows(
    profile: str, fresh: Sequence[tuple[int, NewMemory]]
) -> list[tuple[int, int, str, str, str | None, bytes]]:
    """(key, memory, profile, kind, text, vector) for each passage and standing statement."""
    rows: list[tuple[int, int, str, str, str | None, bytes]] = []
    for key, item in fresh:
        base = key * PASSAGE_SPAN
        rows.extend(
            (base + ordinal, key, profile, "passage", None, vector)
            for ordinal, vector in enumerate(item.passages, start=1)
        )
        rows.extend(
            (base + ordinal, key, profile, kind, text, vector)
            for ordinal, (kind, text, vector) in enumerate(item.standing, start=STANDING_BASE)
        )
    return rows


def insert_passages(
    db: sqlite3.Connection, profile: str, fresh: Sequence[tuple[int, NewMemory]]
) -> None:
    db.executemany(
        "INSERT INTO passages (key, memory, profile, kind, text, vector) VALUES (?,?,?,?,?,?)",
        passage_rows(profile, fresh),
    )


def delete_passages(db: sqlite3.Connection, key: int) -> None:
    db.execute("DELETE FROM passages WHERE memory = ?", (key,))


def statements(db: sqlite3.Connection, keys: Sequence[int]) -> dict[int, tuple[str, str]]:
    """Kind and text of the standing statements with these passage keys."""
    out: dict[int, tuple[str, str]] = {}
    for chunk in chunks(list(keys)):
        rows = db.execute(
            f"SELECT key, kind, text FROM passages WHERE key IN ({marks(len(chunk))})", chunk
        ).fetchall()
        out.update((key, (kind, text or "")) for key, kind, text in rows)
    return out
