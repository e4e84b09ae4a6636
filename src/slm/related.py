"""What is known around one memory: the entities it mentions, the memories linked to it
(neighbouring turns, semantic neighbours, shared entities) and the versions it replaced or
that replace it. What the web page shows with a memory (docs/web.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from slm.engine import Memory
from slm.models import MemoryRecord

#: The most linked memories shown with one memory.
MAX_LINKS = 30


@dataclass(frozen=True, slots=True)
class Entity:
    name: str
    mentions: int
    #: the entity is the memory's speaker ("Name: ...")
    speaker: bool


@dataclass(frozen=True, slots=True)
class Link:
    memory: MemoryRecord
    #: the store's kinds of edge to it (a neighbouring turn, a semantic neighbour, ...)
    kinds: tuple[str, ...]
    #: the strongest of those edges
    weight: float


@dataclass(frozen=True, slots=True)
class Version:
    memory: MemoryRecord
    #: ``""`` when it was replaced explicitly, else the fact (``subject|attribute``) whose
    #: newer value it gives, a probable update found at write time
    slot: str


@dataclass(frozen=True, slots=True)
class Related:
    memory: MemoryRecord
    entities: list[Entity] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    #: older memories this one replaces, and newer ones that replace it
    replaces: list[Version] = field(default_factory=list)
    replaced_by: list[Version] = field(default_factory=list)


def related(memory: Memory, memory_id: str) -> Related:
    """The memory ``memory_id`` of ``memory``'s profile with what surrounds it; raises
    :class:`slm.NotFound` when there is no such memory."""
    record = memory.get(memory_id)
    store, profile, key = memory.store, memory.profile, record.key
    entities = [
        Entity(name, mentions, bool(speaker))
        for _, name, mentions, speaker in store.memory_entities(profile, [key]).get(key, [])
    ]
    merged: dict[int, tuple[list[str], float]] = {}
    for other, kind, weight in memory.indexes.edges.edges_from(profile, [key]).get(key, []):
        kinds, best = merged.get(other, ([], 0.0))
        merged[other] = ([*kinds, kind] if kind not in kinds else kinds, max(best, weight))
    edges = sorted(merged.items(), key=lambda item: (-item[1][1], item[0]))[:MAX_LINKS]
    # older key -> slot and newer key -> slot; an explicit supersession (slot "") wins over a
    # probable update found for the same pair
    older: dict[int, str] = dict.fromkeys(store.versions.replaced(profile, record.id), "")
    newer: dict[int, str] = {}
    for update in store.versions.updates(profile, [key]):
        side, other = (older, update.older) if update.newer == key else (newer, update.newer)
        side[other] = "" if side.get(other) == "" else update.slot
    records = store.get_by_keys(profile, [*(k for k, _ in edges), *older, *newer])
    links = [
        Link(records[k], tuple(kinds), w) for k, (kinds, w) in edges if k in records and k != key
    ]
    replaces = [Version(records[k], slot) for k, slot in older.items() if k in records]
    replaced_by = [Version(records[k], slot) for k, slot in newer.items() if k in records]
    return Related(record, entities, links, replaces, replaced_by)
