"""The lifecycle rows both stores keep, in SQL both dialects read: facts and their updates.

``fact_slots`` holds the single-valued facts each memory states (``slm.ingest.facts``):
its key, the slot (``subject|attribute``), the value and when the memory starts to hold.
``fact_updates`` links, within a slot, each memory to the first memory after it (by
validity time) that gives a *different* value: the probable update. The links of a slot
are recomputed from its facts whenever a memory stating it is added or removed, so the
order memories arrive in does not matter.

Every function takes an open cursor of the store's write transaction (``execute`` and
``executemany`` on a DB-API cursor or an ``sqlite3`` connection) and the dialect's
parameter mark (``?`` or ``%s``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from slm.models import NewMemory, from_micros, to_micros
from slm.store.base import MEANING, Cursor, Update
from slm.store.dialect import Database


def start(item: NewMemory) -> int:
    """When a new memory starts to hold, in microseconds."""
    return to_micros(item.valid_from or item.event_time)


def supersede(
    cur: Cursor, mark: str, profile: str, newer_id: str, older_ids: Sequence[str], at: int
) -> None:
    """End the validity of the memories ``older_ids`` at ``at``, naming ``newer_id``."""
    if older_ids:
        ids = ", ".join([mark] * len(older_ids))
        cur.execute(
            f"UPDATE memories SET valid_to = {mark}, superseded_by = {mark} "
            f"WHERE profile = {mark} AND id IN ({ids})",
            [at, newer_id, profile, *older_ids],
        )


def dismiss(cur: Cursor, mark: str, profile: str, older_id: str, newer_id: str) -> bool:
    """Undo a link: ``newer_id`` does not replace ``older_id`` (both in the profile). The
    probable update between them is removed and never found again, and a supersession of
    one by the other is ended (the older memory holds again). False when nothing linked
    them."""
    rows = cur.execute(
        f"SELECT id, key FROM memories WHERE profile = {mark} AND id IN ({mark}, {mark})",
        [profile, older_id, newer_id],
    ).fetchall()
    keys = {str(id_): int(key) for id_, key in rows}
    older, newer = keys[older_id], keys[newer_id]
    probable = cur.execute(
        f"SELECT count(*) FROM fact_updates WHERE older = {mark} AND newer = {mark}",
        [older, newer],
    ).fetchone()[0]
    ended = cur.execute(
        f"UPDATE memories SET valid_to = NULL, superseded_by = NULL "
        f"WHERE key = {mark} AND superseded_by = {mark}",
        [older, newer_id],
    ).rowcount
    if not probable and not ended:
        return False
    cur.execute(f"DELETE FROM fact_updates WHERE older = {mark} AND newer = {mark}", [older, newer])
    cur.execute(
        f"INSERT INTO fact_dismissed (older, newer, profile) VALUES ({mark}, {mark}, {mark}) "
        "ON CONFLICT DO NOTHING",
        [older, newer, profile],
    )
    return True


def reinstate(cur: Cursor, mark: str, profile: str, removed_id: str) -> None:
    """Make current again what a removed memory had superseded."""
    cur.execute(
        f"UPDATE memories SET valid_to = NULL, superseded_by = NULL "
        f"WHERE profile = {mark} AND superseded_by = {mark}",
        [profile, removed_id],
    )


def insert_facts(
    cur: Cursor,
    mark: str,
    profile: str,
    fresh: Sequence[tuple[int, NewMemory]],
    supersede_updates: bool = False,
) -> None:
    """Store the facts of new memories and relink the slots they state; with
    ``supersede_updates``, a memory a new link names as updated is superseded."""
    rows = [
        (key, profile, slot, value, start(item))
        for key, item in fresh
        for slot, value in item.facts
    ]
    if rows:
        cur.executemany(
            "INSERT INTO fact_slots (key, profile, slot, value, valid_from) "
            f"VALUES ({mark}, {mark}, {mark}, {mark}, {mark}) ON CONFLICT DO NOTHING",
            rows,
        )
    new = {key for key, _ in fresh}
    for slot in sorted({row[2] for row in rows}):
        links = relink(cur, mark, profile, slot)
        if supersede_updates:
            for older, newer, at in links:
                if older in new or newer in new:
                    _supersede_key(cur, mark, profile, older, newer, at)
    _insert_changes(cur, mark, profile, fresh, supersede_updates)


def _insert_changes(
    cur: Cursor,
    mark: str,
    profile: str,
    fresh: Sequence[tuple[int, NewMemory]],
    supersede_updates: bool,
) -> None:
    """Store the changes found by meaning (``slm.ingest.changes``); the evidence is the
    link's slot. With ``supersede_updates`` the sure ones are superseded."""
    batch = [key for key, _ in fresh]
    links = [
        (batch[other] if in_batch else other, key, evidence, sure, start(item))
        for key, item in fresh
        for other, in_batch, evidence, sure in item.changes
    ]
    if not links:
        return
    cur.executemany(
        f"INSERT INTO fact_updates (older, newer, profile, slot) "
        f"VALUES ({mark}, {mark}, {mark}, {mark}) ON CONFLICT DO NOTHING",
        [(older, newer, profile, evidence) for older, newer, evidence, _, _ in links],
    )
    if supersede_updates:
        for older, newer, _, sure, at in links:
            if sure:
                _supersede_key(cur, mark, profile, older, newer, at)


def delete_facts(cur: Cursor, mark: str, profile: str, key: int, relinked: bool = True) -> None:
    """Remove a memory's facts and links; with ``relinked``, relink the slots it stated
    (without: a rebuild, which keeps the links found by meaning)."""
    slots = [r[0] for r in cur.execute(f"SELECT slot FROM fact_slots WHERE key = {mark}", [key])]
    cur.execute(f"DELETE FROM fact_slots WHERE key = {mark}", [key])
    if relinked:  # the memory is gone: its links, and the links undone around it, go too
        for table in ("fact_updates", "fact_dismissed"):
            cur.execute(f"DELETE FROM {table} WHERE older = {mark} OR newer = {mark}", [key, key])
        for slot in slots:
            relink(cur, mark, profile, slot)
    else:  # a rebuild keeps the changes found by meaning: its text and vector are the same
        cur.execute(
            f"DELETE FROM fact_updates WHERE (older = {mark} OR newer = {mark}) "
            f"AND slot NOT LIKE {mark}",
            [key, key, f"{MEANING}%"],
        )


def relink(cur: Cursor, mark: str, profile: str, slot: str) -> list[tuple[int, int, int]]:
    """Recompute the updates of one slot: each holder to the first later holder of its
    scope with another value. Returns them as (older key, newer key, newer's start)."""
    holders = cur.execute(
        "SELECT f.key, f.value, f.valid_from, m.scope FROM fact_slots f "
        f"JOIN memories m ON m.key = f.key WHERE f.profile = {mark} AND f.slot = {mark} "
        "ORDER BY f.valid_from, f.key",
        [profile, slot],
    ).fetchall()
    dismissed = {
        (older, newer)
        for older, newer in cur.execute(
            "SELECT d.older, d.newer FROM fact_dismissed d JOIN fact_slots s ON s.key = d.older "
            f"WHERE s.profile = {mark} AND s.slot = {mark}",
            [profile, slot],
        ).fetchall()
    }
    links: list[tuple[int, int, int]] = []
    for i, (key, value, _, scope) in enumerate(holders):
        later = next(
            (
                h
                for h in holders[i + 1 :]
                if h[1] != value and h[3] == scope and (key, h[0]) not in dismissed
            ),
            None,
        )
        if later is not None:
            links.append((key, later[0], later[2]))
    cur.execute(
        f"DELETE FROM fact_updates WHERE profile = {mark} AND slot = {mark}", [profile, slot]
    )
    if links:
        cur.executemany(
            f"INSERT INTO fact_updates (older, newer, profile, slot) "
            f"VALUES ({mark}, {mark}, {mark}, {mark}) ON CONFLICT DO NOTHING",
            [(older, newer, profile, slot) for older, newer, _ in links],
        )
    return links


def _supersede_key(cur: Cursor, mark: str, profile: str, older: int, newer: int, at: int) -> None:
    """Supersede one memory by key, unless something already superseded it."""
    cur.execute(
        f"UPDATE memories SET valid_to = {mark}, superseded_by = "
        f"(SELECT id FROM memories WHERE key = {mark}) "
        f"WHERE key = {mark} AND profile = {mark} AND valid_to IS NULL",
        [at, newer, older, profile],
    )


class RelationalVersions:
    """The :class:`~slm.store.base.Versions` of a relational store: which memories ended,
    which replaced which, and the probable updates between them, in the SQL both dialects
    read."""

    def __init__(self, store: Database) -> None:
        self._store = store
        self._mark = store.mark

    def superseded(self, profile: str, moment: datetime) -> set[int]:
        at = to_micros(moment)
        return {key for key, valid_to in self._ended(profile) if valid_to <= at}

    def _ended(self, profile: str) -> tuple[tuple[int, int], ...]:
        """Every ended memory of the profile and when it ended, kept while the profile is
        unchanged (ending one is a change of the feed): recalls ask as of many moments."""
        statement = (
            f"SELECT key, valid_to FROM memories WHERE profile = {self._mark} "
            "AND valid_to IS NOT NULL"
        )
        return self._store.cache.value(
            "ended",
            profile,
            lambda: tuple((int(k), int(v)) for k, v in self._store.select(statement, (profile,))),
        )

    def replaced(self, profile: str, newer_id: str) -> list[int]:
        # the partial index on ended memories keeps the scan to those
        m = self._mark
        rows = self._store.select(
            f"SELECT key FROM memories WHERE profile = {m} AND valid_to IS NOT NULL "
            f"AND superseded_by = {m} ORDER BY key",
            (profile, newer_id),
        )
        return [r[0] for r in rows]

    def supersede(
        self, profile: str, newer_id: str, older_ids: Sequence[str], moment: datetime
    ) -> None:
        at = to_micros(moment)
        self._store.change(
            profile, lambda cur: supersede(cur, self._mark, profile, newer_id, older_ids, at)
        )

    def dismiss(self, profile: str, older_id: str, newer_id: str) -> bool:
        return self._store.change(
            profile, lambda cur: dismiss(cur, self._mark, profile, older_id, newer_id)
        )

    def updates(self, profile: str, keys: Sequence[int]) -> list[Update]:
        dialect = self._store.dialect

        def fetch(missing: list[int]) -> dict[int, list[Update]]:
            found: dict[int, list[Update]] = {key: [] for key in missing}
            for part in dialect.slices(missing):
                rows = self._store.select(*self._updates_sql(profile, part))
                for older, newer, o, n, slot, start, side in rows:
                    update = Update(older, newer, o, n, slot, from_micros(start))
                    found[newer if side == "newer" else older].append(update)
            return found

        kept = self._store.cache.keyed("updates", profile, keys, fetch)
        found = dict.fromkeys(update for touching in kept.values() for update in touching)
        return sorted(found, key=lambda u: (u.older, u.newer, u.slot))

    def _updates_sql(self, profile: str, keys: Sequence[int]) -> tuple[str, list[Any]]:
        """The statement reading the updates that touch ``keys``, each with the side its key
        is on: probable ones where a key is the older or the newer memory, explicit ones
        (``superseded_by``, slot ``""``) where it is the older; and its parameters.

        ``by_key`` prefixes the profile columns: SQLite's ``+`` keeps its planner on the
        keys' indexes instead of a scan of the profile's rows. Explicit updates are read
        from the partial index of ended memories (a memory superseded explicitly has
        ended)."""
        m, dialect = self._mark, self._store.dialect
        by_key = dialect.by_key
        start = "coalesce(n.valid_from, n.event_time)"

        def probable(side: str) -> str:
            return (
                f"SELECT u.older, u.newer, o.id, n.id, u.slot, {start}, '{side}' "
                "FROM fact_updates u JOIN memories o ON o.key = u.older "
                "JOIN memories n ON n.key = u.newer "
                f"WHERE {dialect.among(f'u.{side}', keys)[0]} AND {by_key}u.profile = {m}"
            )

        among, values = dialect.among("o.key", keys)
        explicit = (
            f"SELECT o.key, n.key, o.id, n.id, '', {start}, 'older' FROM memories o "
            "JOIN memories n ON n.id = o.superseded_by AND n.profile = o.profile "
            f"WHERE {among} AND o.valid_to IS NOT NULL AND {by_key}o.profile = {m}"
        )
        statement = f"{probable('older')} UNION ALL {probable('newer')} UNION ALL {explicit}"
        return statement, [*values, profile] * 3

    def stating(self, profile: str, slots: Sequence[str]) -> set[int]:
        if not slots:
            return set()
        m = self._mark
        rows = self._store.select(
            f"SELECT DISTINCT key FROM fact_slots WHERE profile = {m} "
            f"AND slot IN ({', '.join([m] * len(slots))})",
            (profile, *slots),
        )
        return {r[0] for r in rows}

    def update_count(self, profile: str) -> int:
        sql = f"SELECT count(*) FROM fact_updates WHERE profile = {self._mark}"
        return int(self._store.select(sql, (profile,))[0][0])

    def exist(self, profile: str) -> bool:
        return self._store.cache.value("versions", profile, lambda: self._exist(profile))

    def _exist(self, profile: str) -> bool:
        m = self._mark
        rows = self._store.select(
            f"SELECT EXISTS (SELECT 1 FROM fact_updates WHERE profile = {m}) OR EXISTS "
            f"(SELECT 1 FROM memories WHERE profile = {m} AND valid_to IS NOT NULL)",
            (profile, profile),
        )
        return bool(rows[0][0])
