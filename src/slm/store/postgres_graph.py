"""SQL for the derived graph and time data of the PostgreSQL store.

The same data as :mod:`slm.store.sqlite_graph` (entities and mentions, referenced dates,
``next``/``prev``/``similar`` edges stored in both directions), written set-at-a-time:
one statement per kind of row for a whole batch, because every statement is a round trip
to the server. Functions take a cursor (inside the caller's transaction for writes) and
filter every statement on the profile.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from psycopg import Cursor

from slm.models import NewMemory, to_micros
from slm.store.sqlite_graph import LONG_SPAN, MAX_SPAN_US, SESSION_GAP_US, SHORT_SPAN_US

Edge = tuple[int, int, str, float]


def insert_graph(cur: Cursor[Any], profile: str, fresh: Sequence[tuple[int, NewMemory]]) -> None:
    """Entities, mentions, referenced dates and edges of newly inserted memories."""
    keys = [key for key, _ in fresh]
    # New rows were inserted with their session; re-derived ones may have a new one.
    cur.execute(
        "UPDATE memories m SET session = u.session FROM unnest(%s::bigint[], %s::text[]) "
        "AS u(key, session) WHERE m.profile = %s AND m.key = u.key "
        "AND m.session IS DISTINCT FROM u.session",
        (keys, [m.session for _, m in fresh], profile),
    )
    _insert_mentions(cur, profile, fresh)
    spans = [(key, start, end) for key, m in fresh for start, end in m.spans]
    if spans:
        cur.execute(
            "INSERT INTO memory_times (profile, key, start_us, end_us) "
            "SELECT %s, * FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[])",
            (profile, *columns(spans, 3)),
        )
    edges: dict[tuple[int, int, str], float] = {}
    previous = _previous_turns(cur, profile, fresh)
    for key, memory in fresh:
        if key in previous:
            edges[(previous[key], key, "next")] = 1.0
            edges[(key, previous[key], "prev")] = 1.0
        neighbours = list(memory.links)
        neighbours += [(keys[i], w) for i, w in memory.batch_links if keys[i] != key]
        for other, weight in neighbours:
            edges[(key, other, "similar")] = weight
            edges[(other, key, "similar")] = weight
    _link(cur, profile, [(src, dst, kind, w) for (src, dst, kind), w in edges.items()])


def columns(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows as parallel lists, for ``unnest`` (one statement for a whole batch)."""
    return [[row[i] for row in rows] for i in range(width)]


def _insert_mentions(
    cur: Cursor[Any], profile: str, fresh: Sequence[tuple[int, NewMemory]]
) -> None:
    kinds: dict[str, str] = {}
    speaker: dict[tuple[str, int], int] = {}
    for key, memory in fresh:
        for name, kind, is_speaker in memory.entities:
            kinds.setdefault(name, kind)
            speaker.setdefault((name, key), int(is_speaker))
    if not kinds:
        return
    names = list(kinds)
    cur.execute(
        "INSERT INTO entities (profile, name, kind) SELECT %s, * FROM unnest(%s::text[], "
        "%s::text[]) ON CONFLICT (profile, name) DO NOTHING",
        (profile, names, list(kinds.values())),
    )
    cur.execute(
        "SELECT name, id FROM entities WHERE profile = %s AND name = ANY(%s)", (profile, names)
    )
    ids: dict[str, int] = dict(cur.fetchall())
    rows = [(ids[name], key, flag) for (name, key), flag in speaker.items()]
    cur.execute(
        "WITH added AS (INSERT INTO mentions (profile, entity, key, speaker) "
        "SELECT %s, * FROM unnest(%s::bigint[], %s::bigint[], %s::smallint[]) "
        "ON CONFLICT DO NOTHING RETURNING entity) "
        "UPDATE entities e SET mentions = e.mentions + a.n "
        "FROM (SELECT entity, count(*) AS n FROM added GROUP BY entity) a WHERE e.id = a.entity",
        (profile, *columns(rows, 3)),
    )


def _previous_turns(
    cur: Cursor[Any], profile: str, fresh: Sequence[tuple[int, NewMemory]]
) -> dict[int, int]:
    """The turn before each memory: the last earlier memory of its session, or without a
    session, of its source when that one is at most ``SESSION_GAP_US`` earlier or later."""
    in_session = [(key, m.session) for key, m in fresh if m.session is not None]
    by_source = [
        (key, m.source, to_micros(m.event_time))
        for key, m in fresh
        if m.session is None and m.source is not None
    ]
    previous: dict[int, int] = {}
    if in_session:
        cur.execute(
            "SELECT u.key, p.key FROM unnest(%s::bigint[], %s::text[]) AS u(key, session) "
            "CROSS JOIN LATERAL (SELECT key FROM memories WHERE profile = %s "
            "AND session = u.session AND key < u.key ORDER BY key DESC LIMIT 1) p",
            (*columns(in_session, 2), profile),
        )
        previous.update(cur.fetchall())
    if by_source:
        cur.execute(
            "SELECT u.key, p.key FROM unnest(%s::bigint[], %s::text[], %s::bigint[]) "
            "AS u(key, source, at) CROSS JOIN LATERAL (SELECT key, event_time FROM memories "
            "WHERE profile = %s AND source = u.source AND session IS NULL AND key < u.key "
            "ORDER BY key DESC LIMIT 1) p WHERE abs(p.event_time - u.at) <= %s",
            (*columns(by_source, 3), profile, SESSION_GAP_US),
        )
        previous.update(cur.fetchall())
    return previous


def _link(cur: Cursor[Any], profile: str, edges: Sequence[Edge]) -> None:
    """Insert or replace edges (each (src, dst, kind) at most once in ``edges``)."""
    if edges:
        cur.execute(
            "INSERT INTO edges (profile, src, dst, kind, weight) SELECT %s, * FROM "
            "unnest(%s::bigint[], %s::bigint[], %s::text[], %s::float8[]) "
            "ON CONFLICT (src, dst, kind) DO UPDATE SET weight = excluded.weight",
            (profile, *columns(edges, 4)),
        )


def delete_graph(cur: Cursor[Any], profile: str, key: int, relink: bool = True) -> None:
    """Remove a memory's graph rows; with ``relink`` its previous and next turns become
    neighbours (a forgotten turn leaves no gap in the conversation)."""
    cur.execute(
        "DELETE FROM edges WHERE profile = %s AND src = %s RETURNING kind, dst", (profile, key)
    )
    turns = {kind: dst for kind, dst in cur.fetchall() if kind in ("prev", "next")}
    cur.execute("DELETE FROM edges WHERE profile = %s AND dst = %s", (profile, key))
    if relink and "prev" in turns and "next" in turns:
        prev, nxt = turns["prev"], turns["next"]
        _link(cur, profile, [(prev, nxt, "next", 1.0), (nxt, prev, "prev", 1.0)])
    cur.execute(
        "WITH gone AS (DELETE FROM mentions WHERE profile = %s AND key = %s RETURNING entity) "
        "UPDATE entities SET mentions = mentions - 1 WHERE profile = %s "
        "AND id IN (SELECT entity FROM gone) RETURNING id",
        (profile, key, profile),
    )
    touched = [row[0] for row in cur.fetchall()]
    cur.execute(
        "DELETE FROM entities WHERE profile = %s AND id = ANY(%s) AND mentions <= 0",
        (profile, touched),
    )
    cur.execute("DELETE FROM memory_times WHERE profile = %s AND key = %s", (profile, key))


# -- reads ------------------------------------------------------------------------------


def find_entities(
    cur: Cursor[Any], profile: str, names: Sequence[str]
) -> dict[str, list[tuple[int, str, int]]]:
    """For each name: matching entities as (id, name, mention count).

    A name matches its own entity and, when it is a single word, the one multi-word entity
    that starts with it ("john" finds "john smith" when no other "john ..." exists).
    """
    wanted = list(dict.fromkeys(names))
    cur.execute(
        "SELECT name, id, name, mentions FROM entities WHERE profile = %s AND name = ANY(%s)",
        (profile, wanted),
    )
    rows = cur.fetchall()
    single = [name for name in wanted if " " not in name]
    cur.execute(
        "SELECT n.name, e.id, e.name, e.mentions, count(*) OVER (PARTITION BY n.name) "
        "FROM unnest(%s::text[]) AS n(name) CROSS JOIN LATERAL (SELECT id, name, mentions "
        "FROM entities WHERE profile = %s AND name > n.name || ' ' "
        "AND name < n.name || '!' ORDER BY name LIMIT 2) e",
        (single, profile),
    )
    rows += [row[:4] for row in cur.fetchall() if row[4] == 1]
    out: dict[str, list[tuple[int, str, int]]] = {}
    for asked, entity, name, count in rows:
        out.setdefault(asked, []).append((int(entity), str(name), int(count)))
    return {name: out[name] for name in wanted if name in out}


def entity_members(
    cur: Cursor[Any], profile: str, entities: Sequence[int], limit: int
) -> dict[int, list[int]]:
    """Memories mentioning each entity (at most ``limit`` each, newest first)."""
    out: dict[int, list[int]] = {entity: [] for entity in entities}
    cur.execute(
        "SELECT e.id, m.key FROM unnest(%s::bigint[]) WITH ORDINALITY AS e(id, n) "
        "CROSS JOIN LATERAL (SELECT key FROM mentions WHERE profile = %s AND entity = e.id "
        "ORDER BY key DESC LIMIT %s) m ORDER BY e.n, m.key DESC",
        (list(entities), profile, limit),
    )
    for entity, key in cur.fetchall():
        out[entity].append(key)
    return out


def speakers(cur: Cursor[Any], profile: str, entities: Sequence[int]) -> set[int]:
    """Those of the profile's ``entities`` with a speaker mention (one probe of the partial
    index ``mentions_speaker`` each)."""
    cur.execute(
        "SELECT id FROM unnest(%s::bigint[]) AS id WHERE EXISTS (SELECT 1 FROM mentions m "
        "WHERE m.entity = id AND m.speaker = 1 AND m.profile = %s)",
        (list(dict.fromkeys(entities)), profile),
    )
    return {row[0] for row in cur.fetchall()}


def memory_entities(
    cur: Cursor[Any], profile: str, keys: Sequence[int]
) -> dict[int, list[tuple[int, str, int, int]]]:
    """Entities each memory mentions, as (id, name, mention count, speaker flag 1 or 0)."""
    cur.execute(
        "SELECT m.key, e.id, e.name, e.mentions, m.speaker FROM mentions m JOIN entities e "
        "ON e.id = m.entity WHERE m.profile = %s AND m.key = ANY(%s) ORDER BY m.key, e.id",
        (profile, list(keys)),
    )
    out: dict[int, list[tuple[int, str, int, int]]] = defaultdict(list)
    for key, entity, name, count, speaker in cur.fetchall():
        out[key].append((entity, name, count, speaker))
    return dict(out)


def edges_from(
    cur: Cursor[Any], profile: str, keys: Sequence[int]
) -> dict[int, list[tuple[int, str, float]]]:
    """Outgoing memory-memory edges as (neighbour, kind, weight)."""
    cur.execute(
        "SELECT src, dst, kind, weight FROM edges WHERE profile = %s AND src = ANY(%s) "
        "ORDER BY src, dst, kind",
        (profile, list(keys)),
    )
    out: dict[int, list[tuple[int, str, float]]] = defaultdict(list)
    for src, dst, kind, weight in cur.fetchall():
        out[src].append((dst, kind, weight))
    return dict(out)


def time_overlaps(
    cur: Cursor[Any], profile: str, start: int, end: int, limit: int
) -> dict[int, tuple[int, int]] | None:
    """Memories whose event time falls in [start, end) or whose referenced dates overlap it.

    Returns key -> (start, end) of the matching time (event time as a zero-length span), or
    None when more than ``limit`` memories match (counted by the server, not read).
    """
    cur.execute(
        "SELECT count(*) FROM (SELECT 1 FROM memories WHERE profile = %s AND event_time >= %s "
        "AND event_time < %s LIMIT %s) AS crowd",
        (profile, start, end, limit + 1),
    )
    row = cur.fetchone()
    if row is not None and row[0] > limit:
        return None
    cur.execute(
        "SELECT key, event_time FROM memories WHERE profile = %s AND event_time >= %s "
        "AND event_time < %s ORDER BY event_time, key LIMIT %s",
        (profile, start, end, limit),
    )
    found: dict[int, tuple[int, int]] = {key: (moment, moment) for key, moment in cur}
    spans: list[tuple[int, int, int]] = []
    for lookback, longer in ((SHORT_SPAN_US, ""), (MAX_SPAN_US, f" AND {LONG_SPAN}")):
        cur.execute(
            "SELECT key, start_us, end_us FROM memory_times WHERE profile = %s "
            f"AND start_us < %s AND start_us > %s AND end_us > %s{longer} "
            "ORDER BY start_us, key LIMIT %s",
            (profile, end, start - lookback, start, limit + 1),
        )
        spans += cur.fetchall()
    ordered = sorted(set(spans), key=lambda r: (r[1], r[0], r[2]))[: limit + 1]
    for key, span_start, span_end in ordered:
        found.setdefault(key, (span_start, span_end))
    return found if len(found) <= limit else None


def referenced_times(
    cur: Cursor[Any], profile: str, keys: Sequence[int]
) -> dict[int, list[tuple[int, int]]]:
    cur.execute(
        "SELECT key, start_us, end_us FROM memory_times WHERE profile = %s AND key = ANY(%s) "
        "ORDER BY key, start_us, end_us",
        (profile, list(keys)),
    )
    out: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for key, span_start, span_end in cur.fetchall():
        out[key].append((span_start, span_end))
    return dict(out)
