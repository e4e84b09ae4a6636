"""PostgreSQL's side of the :class:`~slm.store.dialect.Dialect`.

Every statement is a round trip to the server, so what SQLite does a row or a name at a
time is done here set-at-a-time: many rows go in as arrays through one ``unnest``, and a
lookup per name, per entity or per memory is one ``LATERAL`` join over all of them. Tags
are a ``text[]`` column of ``memories`` with a GIN index, matched with ``@>``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from slm.models import NewMemory, to_micros
from slm.store import sql
from slm.store.base import Cursor, Filters, Postings
from slm.store.dialect import SESSION_GAP_US, Dialect, Rows, mentioned


def columns(rows: Rows, width: int) -> list[list[Any]]:
    """Rows as parallel lists, for ``unnest`` (one statement for a whole batch)."""
    return [[row[i] for row in rows] for i in range(width)]


def _tag_clauses(profile: str, tags: Sequence[str]) -> list[tuple[str, list[Any]]]:
    return [("tags @> %s::text[]", [list(tags)])]


class PostgresDialect(Dialect):
    name = "postgres"
    mark = "%s"
    meta_table = "slm_meta"
    chunk = 5000

    def many(
        self, cur: Cursor, head: str, rows: Rows, types: Sequence[str], tail: str = ""
    ) -> None:
        if rows:
            arrays = ", ".join(f"%s::{kind}[]" for kind in types)
            cur.execute(f"{head} SELECT * FROM unnest({arrays}) {tail}", columns(rows, len(types)))

    def among(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """One array parameter, whatever the number of values: one statement text, which
        the server prepares once per connection (psycopg's ``prepare_threshold``) instead
        of parsing and planning an ``IN`` list of each length anew."""
        return f"{column} = ANY({self.mark})", [list(values)]

    def vector(self, blob: bytes) -> Any:
        return np.frombuffer(blob, dtype="<f4")

    def tags(self, value: Any) -> tuple[str, ...]:
        return tuple(value)

    def where(self, profile: str, filters: Filters) -> tuple[str, list[Any]]:
        return sql.memory_filter(profile, filters, "%s", _tag_clauses)

    def insert_mentions(
        self, cur: Cursor, profile: str, fresh: Sequence[tuple[int, NewMemory]]
    ) -> None:
        kinds, speaker = mentioned(fresh)
        if not kinds:
            return
        names = list(kinds)
        cur.execute(
            "INSERT INTO entities (profile, name, kind) SELECT %s, * FROM unnest(%s::text[], "
            "%s::text[]) ON CONFLICT (profile, name) DO NOTHING",
            (profile, names, list(kinds.values())),
        )
        ids: dict[str, int] = dict(
            cur.execute(
                "SELECT name, id FROM entities WHERE profile = %s AND name = ANY(%s)",
                (profile, names),
            ).fetchall()
        )
        rows = [(ids[name], key, flag) for (name, key), flag in speaker.items()]
        cur.execute(
            "WITH added AS (INSERT INTO mentions (profile, entity, key, speaker) "
            "SELECT %s, * FROM unnest(%s::bigint[], %s::bigint[], %s::smallint[]) "
            "ON CONFLICT DO NOTHING RETURNING entity) "
            "UPDATE entities e SET mentions = e.mentions + a.n "
            "FROM (SELECT entity, count(*) AS n FROM added GROUP BY entity) a "
            "WHERE e.id = a.entity",
            (profile, *columns(rows, 3)),
        )

    def previous_turns(
        self, cur: Cursor, profile: str, fresh: Sequence[tuple[int, NewMemory]]
    ) -> dict[int, int]:
        in_session = [(key, m.session) for key, m in fresh if m.session is not None]
        by_source = [
            (key, m.source, to_micros(m.event_time))
            for key, m in fresh
            if m.session is None and m.source is not None
        ]
        previous: dict[int, int] = {}
        if in_session:
            previous.update(
                cur.execute(
                    "SELECT u.key, p.key FROM unnest(%s::bigint[], %s::text[]) "
                    "AS u(key, session) CROSS JOIN LATERAL (SELECT key FROM memories "
                    "WHERE profile = %s AND session = u.session AND key < u.key "
                    "ORDER BY key DESC LIMIT 1) p",
                    (*columns(in_session, 2), profile),
                ).fetchall()
            )
        if by_source:
            previous.update(
                cur.execute(
                    "SELECT u.key, p.key FROM unnest(%s::bigint[], %s::text[], %s::bigint[]) "
                    "AS u(key, source, at) CROSS JOIN LATERAL (SELECT key, event_time "
                    "FROM memories WHERE profile = %s AND source = u.source "
                    "AND session IS NULL AND key < u.key ORDER BY key DESC LIMIT 1) p "
                    "WHERE abs(p.event_time - u.at) <= %s",
                    (*columns(by_source, 3), profile, SESSION_GAP_US),
                ).fetchall()
            )
        return previous

    def find_entities(
        self, cur: Cursor, profile: str, names: Sequence[str]
    ) -> dict[str, list[tuple[int, str, int]]]:
        """The exact names, then the one longer name each single word starts (one that
        starts two finds neither: ``found`` 2), in one statement."""
        wanted = list(dict.fromkeys(names))
        single = [name for name in wanted if " " not in name]
        rows = cur.execute(
            "SELECT name, id, name, mentions, 1, 0 FROM entities WHERE profile = %s "
            "AND name = ANY(%s) UNION ALL "
            "SELECT n.name, e.id, e.name, e.mentions, count(*) OVER (PARTITION BY n.name), 1 "
            "FROM unnest(%s::text[]) AS n(name) CROSS JOIN LATERAL (SELECT id, name, "
            "mentions FROM entities WHERE profile = %s AND name > n.name || ' ' "
            "AND name < n.name || '!' ORDER BY name LIMIT 2) e",
            (profile, wanted, single, profile),
        ).fetchall()
        out: dict[str, list[tuple[int, str, int]]] = {}
        for asked, entity, name, count, found, _ in sorted(rows, key=lambda row: row[5]):
            if found != 1:
                continue
            out.setdefault(asked, []).append((int(entity), str(name), int(count)))
        return {name: out[name] for name in wanted if name in out}

    def entity_members(
        self, cur: Cursor, profile: str, entities: Sequence[int], limit: int
    ) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {entity: [] for entity in entities}
        for entity, key in cur.execute(
            "SELECT e.id, m.key FROM unnest(%s::bigint[]) WITH ORDINALITY AS e(id, n) "
            "CROSS JOIN LATERAL (SELECT key FROM mentions WHERE profile = %s "
            "AND entity = e.id ORDER BY key DESC LIMIT %s) m ORDER BY e.n, m.key DESC",
            (list(entities), profile, limit),
        ).fetchall():
            out[entity].append(key)
        return out

    def speakers(self, cur: Cursor, profile: str, entities: Sequence[int]) -> set[int]:
        """One probe of the partial index ``mentions_speaker`` each."""
        rows = cur.execute(
            "SELECT id FROM unnest(%s::bigint[]) AS id WHERE EXISTS (SELECT 1 FROM mentions m "
            "WHERE m.entity = id AND m.speaker = 1 AND m.profile = %s)",
            (list(dict.fromkeys(entities)), profile),
        ).fetchall()
        return {row[0] for row in rows}

    def postings(
        self, cur: Cursor, profile: str, terms: Sequence[str], limit: int
    ) -> dict[str, Postings]:
        grouped: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
        for term, key, tf, dl in cur.execute(
            "SELECT t.term, p.key, p.tf, p.dl FROM unnest(%s::text[]) AS t(term) "
            "CROSS JOIN LATERAL (SELECT key, tf, dl FROM lex_postings WHERE profile = %s "
            "AND term = t.term ORDER BY tf DESC, dl, key LIMIT %s) AS p",
            (list(dict.fromkeys(terms)), profile, limit),
        ).fetchall():
            grouped[term].append((key, tf, dl))
        return {term: Postings.of(rows) for term, rows in grouped.items()}
