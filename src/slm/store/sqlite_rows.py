"""Writing memory rows into the SQLite store, a batch per statement (inside the caller's
write transaction)."""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Sequence

from slm.models import NewMemory, to_micros
from slm.store.sqlite_conn import chunks, marks


def new_ids(db: sqlite3.Connection, items: Sequence[NewMemory]) -> list[str]:
    """An id per item: the one it asks for when free, else a fresh random one."""
    ids = [item.id or secrets.token_hex(8) for item in items]
    while True:
        taken: set[str] = set()
        for chunk in chunks(ids):
            taken.update(
                r[0]
                for r in db.execute(
                    f"SELECT id FROM memories WHERE id IN ({marks(len(chunk))})", chunk
                )
            )
        seen: set[str] = set()
        clash = False
        for i, id_ in enumerate(ids):
            if id_ in taken or id_ in seen:
                ids[i] = secrets.token_hex(8)
                clash = True
            seen.add(ids[i])
        if not clash:
            return ids


def insert_rows(
    db: sqlite3.Connection, profile: str, ids: Sequence[str], items: Sequence[NewMemory]
) -> list[int]:
    """Insert the rows in one statement; return their keys (AUTOINCREMENT hands out
    consecutive keys inside one write transaction, checked on the last row)."""
    if not items:
        return []
    (last,) = db.execute(
        "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'memories'), 0),"
        " coalesce((SELECT max(key) FROM memories), 0))"
    ).fetchone()
    db.executemany(
        "INSERT INTO memories (id, profile, content, content_hash, event_time, recorded_at,"
        " source, confidence, metadata, tags, valid_from, valid_to, superseded_by)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        [
            (
                id_,
                profile,
                m.content,
                m.content_hash,
                to_micros(m.event_time),
                to_micros(m.recorded_at),
                m.source,
                m.confidence,
                json.dumps(dict(m.metadata), ensure_ascii=False, sort_keys=True),
                json.dumps(list(m.tags), ensure_ascii=False),
                to_micros(m.valid_from) if m.valid_from is not None else None,
                to_micros(m.valid_to) if m.valid_to is not None else None,
                m.superseded_by,
            )
            for id_, m in zip(ids, items, strict=True)
        ],
    )
    keys = list(range(last + 1, last + 1 + len(items)))
    row = db.execute("SELECT key FROM memories WHERE id = ?", (ids[-1],)).fetchone()
    if row is None or row[0] != keys[-1]:
        found: dict[str, int] = {}
        for chunk in chunks(list(ids)):
            found.update(
                db.execute(f"SELECT id, key FROM memories WHERE id IN ({marks(len(chunk))})", chunk)
            )
        keys = [found[id_] for id_ in ids]
    return keys
