"""Spreading-activation channel over the memory graph.

Nodes are memories and entities; edges are mentions (memory-entity), neighbouring turns of
one session and strong semantic neighbours (memory-memory). Seeds:

- each entity named in the question, with activation 1;
- the top ``SEED_HITS`` hits of every channel that ran before, with activation 1/rank.

Each hop passes ``DECAY * a(u) * w(u, v) / fanout(u)`` from a node to each neighbour
(``w`` = 1 for mentions and turns, the cosine for semantic edges; ``fanout`` = the node's
number of edges of that kind, so a hub entity mentioned by hundreds of memories passes each
of them almost nothing). After ``HOPS`` hops, memories whose total activation (seed plus
received) is at least ``MIN_ACTIVATION`` are candidates, ranked by it. Expansion is
bounded: at most ``FRONTIER`` nodes per hop, ``MEMBERS`` memories per entity, and an
entity is expanded only when its share per member reaches ``MIN_SHARE``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from slm.channels.base import ChannelDefaults, Context, Hit, Need, Role, best_pairs, ranked_arrays
from slm.channels.graphview import GraphView
from slm.store import Store

DECAY = 0.5
HOPS = 2
SEED_HITS = 10
MIN_ACTIVATION = 0.01
FRONTIER = 64
MEMBERS = 500
#: An entity is expanded only when it passes each member at least this much: a hub
#: mentioned by thousands of memories would pass each of them almost nothing, so reading
#: its members would be work without effect (ten such shares do not make a candidate).
MIN_SHARE = MIN_ACTIVATION / 10


def _top(activation: dict[int, float], n: int) -> dict[int, float]:
    """The ``n`` most activated nodes, most first, ties by id."""
    return activation if len(activation) <= n else dict(best_pairs(activation, n))


class SpreadingChannel(ChannelDefaults):
    name: ClassVar[str] = "spreading"
    weight: ClassVar[float] = 0.5
    needs: ClassVar[frozenset[Need]] = frozenset({"prior"})
    role: ClassVar[Role] = "supports"
    index: ClassVar[str | None] = None

    def seeds(
        self, context: Context, degree: dict[int, int]
    ) -> tuple[dict[int, float], dict[int, float]]:
        """(memory key -> activation, entity id -> activation) to start from; records
        each entity's mention count in ``degree``."""
        memories: dict[int, float] = {}
        for hits in context.prior.values():
            for hit in hits[:SEED_HITS]:
                memories[hit.key] = max(memories.get(hit.key, 0.0), 1.0 / hit.rank)
        entities: dict[int, float] = {}
        for matches in context.query.entity_ids.values():
            for entity, count in matches:
                entities[entity] = 1.0
                degree[entity] = count
        return memories, entities

    def candidates(self, context: Context, k: int) -> list[Hit]:
        query, graph = context.query, context.graph
        degree: dict[int, int] = {}
        memories, entities = self.seeds(context, degree)
        # What each memory received, hop by hop: the seeds first, then each hop's sums, so
        # that a memory's total is added up in that order.
        received = [(_keys_of(memories), np.fromiter(memories.values(), np.float64))]
        admitted = None if query.allowed is None else _keys_of(query.allowed)
        for hop in range(HOPS):
            if not memories and not entities:
                break
            last = hop == HOPS - 1
            keys, sums, next_entities = self._hop(
                context.store, query.profile, graph, memories, entities, degree, last
            )
            if admitted is not None:  # activation passes only through what the filter admits
                inside = np.isin(keys, admitted)
                keys, sums = keys[inside], sums[inside]
            received.append((keys, sums))
            if not last:
                memories = _best(keys, sums, FRONTIER)
                entities = _top(next_entities, FRONTIER)
        keys, totals = _summed(
            np.concatenate([keys for keys, _ in received]),
            np.concatenate([sums for _, sums in received]),
        )
        chosen = totals >= MIN_ACTIVATION
        return ranked_arrays(keys[chosen], totals[chosen], k)

    def _hop(
        self,
        store: Store,
        profile: str,
        graph: GraphView,
        memories: dict[int, float],
        entities: dict[int, float],
        degree_of: dict[int, int],
        last: bool,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], dict[int, float]]:
        """One step of activation: the memories it reaches by ascending key, what each
        receives, and what each entity receives. On the ``last`` hop only memories matter
        (they are the candidates), so memory-to-entity flow is not computed."""
        # What each memory receives, as (to, amount) in the order the sums are taken.
        to: list[int] = []
        amounts: list[float] = []
        out_entities: dict[int, float] = defaultdict(float)
        sources = list(memories)
        for key, edges in graph.edges(sources).items():
            passed, fanout = DECAY * memories[key], len(edges)  # the same arithmetic, hoisted
            to.extend([neighbour for neighbour, _, _ in edges])
            amounts.extend([passed * weight / fanout for _, _, weight in edges])
        mentions = {} if last else graph.mentions(sources)
        for key, mentioned in mentions.items():
            share = DECAY * memories[key] / len(mentioned)
            for entity, _, count, _ in mentioned:
                out_entities[entity] += share
                degree_of[entity] = count
        shares = {
            entity: DECAY * activation / max(degree_of.get(entity, 1), 1)
            for entity, activation in entities.items()
        }
        worth = [entity for entity, share in shares.items() if share >= MIN_SHARE]
        members_of = store.entity_members(profile, worth, MEMBERS)
        for entity, members in members_of.items():
            to.extend(members)
            amounts.extend([shares[entity]] * len(members))
        keys, sums = _summed(np.array(to, dtype=np.int64), np.array(amounts, dtype=np.float64))
        return keys, sums, dict(out_entities)


def _keys_of(keys: Iterable[int]) -> npt.NDArray[np.int64]:
    return np.fromiter(keys, dtype=np.int64)


def _summed(
    to: npt.NDArray[np.int64], amounts: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Each key of ``to`` once, ascending, and the sum of its ``amounts``, added in the
    order given (``bincount`` adds one by one: the floating-point sums are those of a loop
    over them)."""
    keys, where = np.unique(to, return_inverse=True)
    sums = np.bincount(where, weights=amounts, minlength=len(keys))
    return keys, sums.astype(np.float64, copy=False)


def _best(keys: npt.NDArray[np.int64], sums: npt.NDArray[np.float64], n: int) -> dict[int, float]:
    """:func:`_top` of the memories one hop reached (unique keys, ascending)."""
    if len(keys) > n:
        order = np.lexsort((keys, -sums))[:n]
        keys, sums = keys[order], sums[order]
    return dict(zip(keys.tolist(), sums.tolist(), strict=True))
