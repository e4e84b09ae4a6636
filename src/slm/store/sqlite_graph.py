"""SQL for the derived graph and time data of the SQLite store.

Functions take an open connection (inside the caller's transaction for writes). Lookups
by key write ``+profile`` so SQLite uses the key's index, never a scan of the profile's
rows through a ``(profile, ...)`` index. Edges are
stored in both directions: ``next``/``prev`` between neighbouring turns of one session,
``similar`` between strong semantic neighbours (weight = cosine). Entities are nodes of
their own, linked to memories through ``mentions``.
"""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from slm.models import NewMemory, to_micros
from slm.store.sqlite_conn import CHUNK, marks

#: Memories without a session key are neighbours when from one named source this close in time.
SESSION_GAP_US = 30 * 60 * 1_000_000
#: Referenced-date spans longer than this are not searched by start (see ``time_overlaps``).
MAX_SPAN_US = 2 * 366 * 86_400 * 1_000_000
#: Spans up to this long (a day, a week, a month) are found by start within this distance
#: of a window; longer ones through their own partial index (``memory_times_long``), so a
#: window query never walks two years of short spans.
SHORT_SPAN_US = 62 * 86_400 * 1_000_000
#: The partial index's condition, written out so the planner can match it.
LONG_SPAN = f"end_us - start_us > {SHORT_SPAN_US}"


def insert_graph(
    db: sqlite3.Connection, profile: str, fresh: Sequence[tuple[int, NewMemory]]
) -> None:
    """Entities, mentions, referenced dates and edges of newly inserted memories, written
    with one statement per kind of row for the whole batch."""
    batch_keys = [key for key, _ in fresh]
    db.executemany(
        "UPDATE memories SET session = ? WHERE key = ?",
        [(m.session, key) for key, m in fresh],
    )
    _insert_mentions(db, profile, fresh)
    db.executemany(
        "INSERT INTO memory_times (key, profile, start_us, end_us) VALUES (?,?,?,?)",
        [(key, profile, start, end) for key, m in fresh for start, end in m.spans],
    )
    edges: dict[tuple[int, int, str], float] = {}
    last_in_batch: dict[tuple[str | None, str | None], int] = {}
    for key, memory in fresh:
        thread = (memory.session, None if memory.session is not None else memory.source)
        previous = last_in_batch.get(thread) if memory.session is not None else None
        if previous is None:
            previous = _previous_turn(db, profile, key, memory)
        last_in_batch[thread] = key
        if previous is not None:
            edges[(previous, key, "next")] = 1.0
            edges[(key, previous, "prev")] = 1.0
        neighbours = list(memory.links)
        neighbours += [(batch_keys[i], w) for i, w in memory.batch_links if batch_keys[i] != key]
        for other, weight in neighbours:
            edges[(key, other, "similar")] = weight
            edges[(other, key, "similar")] = weight
    db.executemany(
        "INSERT OR REPLACE INTO edges (profile, src, dst, kind, weight) VALUES (?,?,?,?,?)",
        [(profile, src, dst, kind, w) for (src, dst, kind), w in edges.items()],
    )


def _insert_mentions(
    db: sqlite3.Connection, profile: str, fresh: Sequence[tuple[int, NewMemory]]
) -> None:
    """Entities (the first mention's kind wins), then one mention row per entity and
    memory (the first mention's speaker flag wins), then the entities' mention counts."""
    kinds: dict[str, str] = {}
    mentions: dict[tuple[str, int], bool] = {}
    for key, memory in fresh:
        for name, kind, speaker in memory.entities:
            kinds.setdefault(name, kind)
            mentions.setdefault((name, key), speaker)
    if not mentions:
        return
    db.executemany(
        "INSERT INTO entities (profile, name, kind) VALUES (?, ?, ?) "
        "ON CONFLICT (profile, name) DO NOTHING",
        [(profile, name, kind) for name, kind in kinds.items()],
    )
    names = list(kinds)
    ids: dict[str, int] = {}
    for start in range(0, len(names), CHUNK):
        chunk = names[start : start + CHUNK]
        ids.update(
            db.execute(
                f"SELECT name, id FROM entities WHERE profile = ? "
                f"AND name IN ({marks(len(chunk))})",
                [profile, *chunk],
            )
        )
    rows = [(ids[name], key, int(speaker)) for (name, key), speaker in mentions.items()]
    before = db.total_changes
    db.executemany("INSERT OR IGNORE INTO mentions (entity, key, speaker) VALUES (?, ?, ?)", rows)
    touched = list(dict.fromkeys(entity for entity, _, _ in rows))
    if db.total_changes - before == len(rows):  # all new: count them here
        added = Counter(entity for entity, _, _ in rows)
        db.executemany(
            "UPDATE entities SET mentions = mentions + ? WHERE id = ?",
            [(n, entity) for entity, n in added.items()],
        )
    else:  # some existed already: count from the rows
        db.executemany(
            "UPDATE entities SET mentions = (SELECT count(*) FROM mentions WHERE entity = ?) "
            "WHERE id = ?",
            [(entity, entity) for entity in touched],
        )


def _previous_turn(db: sqlite3.Connection, profile: str, key: int, memory: NewMemory) -> int | None:
    if memory.session is not None:
        row = db.execute(
            "SELECT key FROM memories WHERE profile = ? AND session = ? AND key < ? "
            "ORDER BY key DESC LIMIT 1",
            (profile, memory.session, key),
        ).fetchone()
        return int(row[0]) if row else None
    if memory.source is None:
        return None
    row = db.execute(
        "SELECT key, event_time FROM memories WHERE profile = ? AND source = ? "
        "AND session IS NULL AND key < ? ORDER BY key DESC LIMIT 1",
        (profile, memory.source, key),
    ).fetchone()
    if row and abs(row[1] - to_micros(memory.event_time)) <= SESSION_GAP_US:
        return int(row[0])
    return None


def _link(db: sqlite3.Connection, profile: str, src: int, dst: int, kind: str, w: float) -> None:
    db.execute(
        "INSERT OR REPLACE INTO edges (profile, src, dst, kind, weight) VALUES (?,?,?,?,?)",
        (profile, src, dst, kind, w),
    )


def delete_graph(db: sqlite3.Connection, profile: str, key: int, relink: bool = True) -> None:
    """Remove a memory's graph rows; with ``relink`` its previous and next turns become
    neighbours (a forgotten turn leaves no gap in the conversation)."""
    prev = db.execute("SELECT dst FROM edges WHERE src = ? AND kind = 'prev'", (key,)).fetchone()
    nxt = db.execute("SELECT dst FROM edges WHERE src = ? AND kind = 'next'", (key,)).fetchone()
    db.execute("DELETE FROM edges WHERE src = ?", (key,))
    db.execute("DELETE FROM edges WHERE dst = ?", (key,))
    if relink and prev and nxt:
        _link(db, profile, prev[0], nxt[0], "next", 1.0)
        _link(db, profile, nxt[0], prev[0], "prev", 1.0)
    entities = [r[0] for r in db.execute("SELECT entity FROM mentions WHERE key = ?", (key,))]
    db.execute("DELETE FROM mentions WHERE key = ?", (key,))
    db.executemany(
        "UPDATE entities SET mentions = mentions - 1 WHERE id = ?", [(e,) for e in entities]
    )
    db.executemany("DELETE FROM entities WHERE id = ? AND mentions <= 0", [(e,) for e in entities])
    db.execute("DELETE FROM memory_times WHERE key = ?", (key,))


# -- reads ------------------------------------------------------------------------------


def find_entities(
    db: sqlite3.Connection, profile: str, names: Sequence[str]
) -> dict[str, list[tuple[int, str, int]]]:
    """For each name: matching entities as (id, name, mention count).

    A name matches its own entity and, when it is a single word, the one multi-word entity
    that starts with it ("john" finds "john smith" when no other "john ..." exists).
    """
    out: dict[str, list[tuple[int, str, int]]] = {}
    for name in dict.fromkeys(names):
        rows = db.execute(
            "SELECT id, name, mentions FROM entities WHERE profile = ? AND name = ?",
            (profile, name),
        ).fetchall()
        if " " not in name:
            longer = db.execute(
                "SELECT id, name, mentions FROM entities WHERE profile = ? "
                "AND name > ? AND name < ? LIMIT 2",
                (profile, name + " ", name + "!"),
            ).fetchall()
            if len(longer) == 1:
                rows += longer
        if rows:
            out[name] = [(int(i), str(n), int(m)) for i, n, m in rows]
    return out


def entity_members(
    db: sqlite3.Connection, profile: str, entities: Sequence[int], limit: int
) -> dict[int, list[int]]:
    """Memories mentioning each entity (at most ``limit`` each, newest first)."""
    out: dict[int, list[int]] = {}
    for entity in entities:
        rows = db.execute(
            "SELECT m.key FROM mentions m JOIN entities e ON e.id = m.entity "
            "WHERE m.entity = ? AND e.profile = ? ORDER BY m.key DESC LIMIT ?",
            (entity, profile, limit),
        ).fetchall()
        out[entity] = [r[0] for r in rows]
    return out


def speakers(db: sqlite3.Connection, profile: str, entities: Sequence[int]) -> set[int]:
    """Those of the profile's ``entities`` with a speaker mention: one probe of the partial
    index ``mentions_speaker`` each. Left to itself the planner walks the entity's mentions
    by primary key: for the non-speakers among the 1M benchmark store's 400 most mentioned
    entities (up to 18,000 mentions) that took 0.37 ms each on average, against 0.01."""
    return {
        entity
        for entity in dict.fromkeys(entities)
        if db.execute(
            "SELECT 1 FROM mentions m INDEXED BY mentions_speaker "
            "JOIN entities e ON e.id = m.entity "
            "WHERE m.entity = ? AND m.speaker = 1 AND e.profile = ? LIMIT 1",
            (entity, profile),
        ).fetchone()
    }


def memory_entities(
    db: sqlite3.Connection, profile: str, keys: Sequence[int]
) -> dict[int, list[tuple[int, str, int, int]]]:
    """Entities each memory mentions, as (id, name, mention count, speaker flag 1 or 0)."""
    return _grouped(
        db,
        "SELECT m.key, e.id, e.name, e.mentions, m.speaker FROM mentions m JOIN entities e "
        "ON e.id = m.entity WHERE +e.profile = ? AND m.key IN ({marks})",
        profile,
        keys,
    )


def edges_from(
    db: sqlite3.Connection, profile: str, keys: Sequence[int]
) -> dict[int, list[tuple[int, str, float]]]:
    """Outgoing memory-memory edges as (neighbour, kind, weight)."""
    return _grouped(
        db,
        "SELECT src, dst, kind, weight FROM edges WHERE +profile = ? AND src IN ({marks})",
        profile,
        keys,
    )


def time_overlaps(
    db: sqlite3.Connection, profile: str, start: int, end: int, limit: int
) -> dict[int, tuple[int, int]] | None:
    """Memories whose event time falls in [start, end) or whose referenced dates overlap it.

    Returns key -> (start, end) of the matching time (event time as a zero-length span), or
    None when more than ``limit`` memories match: a crowded window is counted inside SQLite,
    not read row by row.
    """
    (events,) = db.execute(
        "SELECT count(*) FROM (SELECT 1 FROM memories WHERE profile = ? AND event_time >= ? "
        "AND event_time < ? LIMIT ?)",
        (profile, start, end, limit + 1),
    ).fetchone()
    if events > limit:
        return None
    found: dict[int, tuple[int, int]] = {}
    rows = db.execute(
        "SELECT key, event_time FROM memories WHERE profile = ? AND event_time >= ? "
        "AND event_time < ? ORDER BY event_time LIMIT ?",
        (profile, start, end, limit),
    ).fetchall()
    for key, moment in rows:
        found[key] = (moment, moment)
    # Spans in (start_us, rowid) order, as one query over the whole lookback would give.
    spans: dict[int, tuple[int, int, int]] = {}
    for lookback, longer in ((SHORT_SPAN_US, ""), (MAX_SPAN_US, f" AND {LONG_SPAN}")):
        for rowid, key, span_start, span_end in db.execute(
            "SELECT rowid, key, start_us, end_us FROM memory_times WHERE profile = ? "
            f"AND start_us < ? AND start_us > ? AND end_us > ?{longer} "
            "ORDER BY start_us, rowid LIMIT ?",
            (profile, end, start - lookback, start, limit + 1),
        ):
            spans[rowid] = (key, span_start, span_end)
    ordered = sorted(spans.items(), key=lambda item: (item[1][1], item[0]))[: limit + 1]
    for _, (key, span_start, span_end) in ordered:
        found.setdefault(key, (span_start, span_end))
    return found if len(found) <= limit else None


def referenced_times(
    db: sqlite3.Connection, profile: str, keys: Sequence[int]
) -> dict[int, list[tuple[int, int]]]:
    """Dates each memory's text refers to, as (start, end) microseconds."""
    return _grouped(
        db,
        "SELECT key, start_us, end_us FROM memory_times WHERE +profile = ? AND key IN ({marks})",
        profile,
        keys,
    )


def _grouped(
    db: sqlite3.Connection, sql: str, profile: str, keys: Sequence[int]
) -> dict[int, list[Any]]:
    """Rows of ``sql`` (its ``{marks}`` filled with one placeholder per key, in chunks that
    stay under SQLite's parameter limit), grouped by their first column, the rest as tuples."""
    out: dict[int, list[Any]] = defaultdict(list)
    for start in range(0, len(keys), CHUNK):
        chunk = list(keys[start : start + CHUNK])
        for row in db.execute(sql.format(marks=marks(len(chunk))), [profile, *chunk]):
            out[row[0]].append(row[1:])
    return dict(out)
