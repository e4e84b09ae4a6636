"""Memory that stays true, on the read path: newer versions of the candidates' facts.

A candidate can have newer versions: a memory that superseded it (``superseded_by``), or
a probable update found at write time (``slm.ingest.facts``: another value for the same
subject and attribute). A recall

1. *carries forward* each leading candidate to the version of its fact that held at the
   moment the question asks about (its latest newer version started by then): that
   version gets at least the candidate's fused score (and is pulled in if no channel found
   it), and passes the evidence floor when the candidate does, so the current value is a
   candidate even when its words differ from the question's ("I moved to Lisbon" for
   "Where do I live?"), and *carries the relevance* of the best of the versions it
   replaces (:func:`inherit`): it is the value those versions stated, now, and answers
   the question as strongly, so a minimum relevance, the floor and calibration see the
   current value rather than the stale one alone (docs/scoring.md);
2. *ranks the version that held at the moment asked about first* among the versions
   present: the latest one that had started by then. The moment is ``as_of``, else the
   middle of the time window a question about the past names ("in March 2023"), else
   now; a question about the past without a date ("Where did I live before?") reorders
   nothing. The version moved up takes a ranking score just above the best of its
   versions (:data:`CURRENT_MARGIN`); this step leaves ``relevance_score`` as step 1 set it.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from datetime import datetime

from slm.channels import Query
from slm.models import MemoryRecord
from slm.recall.evidence import Evidence
from slm.store import Store, Update

#: How many of the fused candidates have their newer versions looked up.
LEADING = 30
#: How many steps along a chain of versions (A -> B -> C) one recall follows.
CHAIN_STEPS = 8
#: How far above the best of its versions the current version's ranking score is set.
CURRENT_MARGIN = 1e-4


def moment_asked(query: Query) -> datetime | None:
    """The moment whose version of a fact the question wants, or None (no reordering)."""
    if query.filters.as_of is not None:
        return query.filters.as_of
    if not query.past:
        return query.now
    if query.window is not None:
        return query.window.start + (query.window.end - query.window.start) / 2
    return None


def versions(store: Store, profile: str, keys: Sequence[int]) -> list[Update]:
    """The updates around ``keys``, following newer versions up to :data:`CHAIN_STEPS`
    steps."""
    seen = set(keys)
    frontier = list(keys)
    found: dict[tuple[int, int, str], Update] = {}
    for _ in range(CHAIN_STEPS):
        if not frontier:
            break
        step = []
        for update in store.versions.updates(profile, frontier):
            found.setdefault((update.older, update.newer, update.slot), update)
            if update.newer not in seen:
                seen.add(update.newer)
                step.append(update.newer)
        frontier = step
    return list(found.values())


def carry_forward(
    fused: MutableMapping[int, float],
    updates: Sequence[Update],
    query: Query,
    moment: datetime,
) -> dict[int, tuple[int, ...]]:
    """Give the version of each candidate's fact that held at ``moment`` (its latest newer
    version started by then) at least the candidate's fused score, pulling it in if no
    channel found it; the versions in between keep their own scores. Returns those
    current versions, each with the candidates it is the current version of (best fused
    first)."""
    newer: dict[int, list[tuple[datetime, int]]] = {}
    for update in updates:
        if update.newer_from <= moment and query.admits(update.newer):
            newer.setdefault(update.older, []).append((update.newer_from, update.newer))
    carried: dict[int, tuple[int, ...]] = {}
    for key in sorted(fused, key=lambda k: (-fused[k], k)):
        if key not in newer:
            continue
        latest: tuple[datetime, int] | None = None
        seen, stack = {key}, [key]
        while stack:  # every later version, along chains and branches
            for version in newer.get(stack.pop(), ()):
                if version[1] not in seen:
                    seen.add(version[1])
                    stack.append(version[1])
                    latest = version if latest is None or version > latest else latest
        if latest is None:
            continue
        carried[latest[1]] = (*carried.get(latest[1], ()), key)
        if fused.get(latest[1], -1.0) < fused[key]:
            fused[latest[1]] = fused[key]
    return carried


def inherit(
    evidence: MutableMapping[int, Evidence], carried: Mapping[int, Sequence[int]]
) -> dict[int, int]:
    """Give each current version in ``carried`` the relevance of the most relevant of the
    versions it replaces, when that is higher than its own (its other evidence stays its
    own). Returns the keys that took one, each with the key it was taken from."""
    taken: dict[int, int] = {}
    for current, olders in carried.items():
        if current not in evidence:
            continue
        known = [key for key in olders if key in evidence]
        if not known:
            continue
        best = max(known, key=lambda key: (evidence[key].relevance, -key))
        if evidence[best].relevance > evidence[current].relevance:
            evidence[current] = evidence[current]._replace(relevance=evidence[best].relevance)
            taken[current] = best
    return taken


def current_first(
    ranking: MutableMapping[int, float],
    updates: Sequence[Update],
    records: Mapping[int, MemoryRecord],
    moment: datetime,
) -> set[int]:
    """Move up, within each group of versions in ``ranking``, the latest version that had
    started by ``moment``; returns the keys moved."""
    groups = _groups([u for u in updates if u.older in ranking and u.newer in ranking])
    moved = set()
    for members in groups:
        started = [key for key in members if key in records and records[key].starts <= moment]
        if not started:
            continue
        current = max(started, key=lambda key: (records[key].starts, key))
        best = max(ranking[key] for key in members if key != current)
        if ranking[current] <= best:
            ranking[current] = best + CURRENT_MARGIN
            moved.add(current)
    return moved


def newer_ids(updates: Sequence[Update], key: int) -> tuple[str, ...]:
    """Ids of the probable updates of memory ``key``: not those that replace it by the
    caller's word (``superseded_by`` says so already)."""
    said = {u.newer for u in updates if u.older == key and u.explicit}
    return tuple(
        dict.fromkeys(
            u.newer_id for u in updates if u.older == key and not u.explicit and u.newer not in said
        )
    )


def _groups(updates: Sequence[Update]) -> list[set[int]]:
    """The connected groups of keys the updates link."""
    parent: dict[int, int] = {}

    def root(key: int) -> int:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    for update in updates:
        parent[root(update.older)] = root(update.newer)
    groups: dict[int, set[int]] = {}
    for key in list(parent):
        groups.setdefault(root(key), set()).add(key)
    return list(groups.values())
