"""Query-time view of the memory graph: the edges and entity mentions of the memories one
recall touches, read at most once per memory (the edges from their arrays, slm.index.edges;
the mentions from the store) and shared by the spreading channel, the evidence floor and
the entity-graph boost (which look at many of the same memories)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from slm.index.edges import EdgeCache
from slm.store.base import Graph

T = TypeVar("T")
Edge = tuple[int, str, float]
Mention = tuple[int, str, int, int]


class GraphView:
    def __init__(self, store: Graph, edges: EdgeCache, profile: str) -> None:
        self._store = store
        self._arrays = edges
        self._profile = profile
        self._edges: dict[int, Sequence[Edge]] = {}
        self._mentions: dict[int, Sequence[Mention]] = {}

    def edges(self, keys: Iterable[int]) -> Mapping[int, Sequence[Edge]]:
        """Outgoing edges (neighbour, kind, weight) of each key that has any."""
        return _cached(self._edges, keys, lambda ks: self._arrays.edges_from(self._profile, ks))

    def mentions(self, keys: Iterable[int]) -> Mapping[int, Sequence[Mention]]:
        """Entities (id, name, mention count, speaker flag) each key mentions, for keys that
        mention any."""
        return _cached(
            self._mentions, keys, lambda ks: self._store.memory_entities(self._profile, ks)
        )


def _cached(
    cache: dict[int, Sequence[T]],
    keys: Iterable[int],
    read: Callable[[Sequence[int]], Mapping[int, Sequence[T]]],
) -> dict[int, Sequence[T]]:
    wanted = list(dict.fromkeys(keys))
    missing = [key for key in wanted if key not in cache]
    if missing:
        found = read(missing)
        for key in missing:
            cache[key] = found.get(key, ())
    # Ascending keys, the order the store's queries return them in (sums of activation
    # are then added up in the same order whatever asked first).
    return {key: cache[key] for key in sorted(wanted) if cache[key]}
