"""The ``Channel`` protocol: a candidate producer the engine runs on every recall.

A channel has a name, says whether it is healthy (and why not), and turns an interpreted
query into ranked hits with raw scores. Channels never write; they read the store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Protocol

import numpy as np
import numpy.typing as npt

from slm.graphview import GraphView
from slm.ingest.timeexpr import TimeSpan
from slm.lexicon import Lexicon
from slm.store import Filters, Store, Vector

#: The unit of the chance correction in :func:`passage_similarity`: how far apart the
#: cosines of one question with two passages of the same unrelated text lie. For
#: all-MiniLM-L6-v2 a question's cosine with unrelated passages spreads by 0.097 (standard
#: deviation) and consecutive passages of one text correlate at 0.81, so that spread is
#: 0.097 * sqrt(1 - 0.81) = 0.04 (measured on the BEAM dev questions against another
#: conversation's passages).
CHANCE_SPREAD = 0.04

#: How many nearest neighbours one vector search fetches per recall; the semantic, Hopfield
#: and temporal channels all read prefixes of this one list.
SHARED_NEAREST = 200


@dataclass(frozen=True, slots=True)
class Hit:
    """One candidate from one channel: internal key, 1-based rank, the channel's raw score."""

    key: int
    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class Health:
    healthy: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Query:
    """A recall question, interpreted once by the engine and shared by every channel."""

    text: str
    profile: str
    vector: Vector
    terms: tuple[str, ...]
    now: datetime
    filters: Filters = field(default_factory=Filters)
    allowed: frozenset[int] | None = None
    #: entity keys named in the question
    entities: tuple[str, ...] = ()
    #: the stored entities each of them resolves to, as (entity id, mention count)
    entity_ids: Mapping[str, tuple[tuple[int, int], ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    #: the text the query vector embeds: the question without the names of people who speak
    #: in a large share of the store (``engine._everywhere``)
    embedded_text: str = ""
    #: the time window the question refers to, if any
    window: TimeSpan | None = None
    #: whether the question asks when something happened
    when: bool = False
    #: the lexical index as seen by this query's terms (read lazily, once)
    lexicon: Lexicon | None = None
    #: the memory graph as seen by this recall (read lazily, once per memory)
    graph: GraphView | None = None
    #: hits of the channels that ran before this one, by channel name
    prior: Mapping[str, tuple[Hit, ...]] = field(default_factory=lambda: MappingProxyType({}))
    #: the last vector search for this query, by how many it asked for (shared by copies)
    _nearest: dict[int, list[tuple[int, float]]] = field(default_factory=dict, compare=False)
    #: each memory's similarity to the query, once computed (shared by copies)
    _similarity: dict[int, float] = field(default_factory=dict, compare=False)

    def admits(self, key: int) -> bool:
        return self.allowed is None or key in self.allowed

    def graph_view(self, store: Store) -> GraphView:
        """This recall's graph view (a private one when the query was built without)."""
        return self.graph if self.graph is not None else GraphView(store, self.profile)

    def nearest(self, store: Store, n: int) -> list[tuple[int, float]]:
        """The ``n`` admitted memories most similar to the query (:meth:`similarity`), best
        first, ties by key, from the memories' own vectors and their further passages. One
        search serves every channel: a smaller ``n`` reads a prefix of a larger one."""
        for asked, found in self._nearest.items():
            if asked >= n or len(found) < asked:  # enough, or all there is
                return found[:n]
        allowed = set(self.allowed) if self.allowed is not None else None
        own = store.vector_search(self.profile, self.vector, n, allowed)
        further = store.passage_search(self.profile, self.vector, n, allowed)
        scores = self.similarity(store, [key for key, _ in own] + [key for key, _ in further])
        found = sorted(scores.items(), key=lambda p: (-p[1], p[0]))[:n]
        self._nearest.clear()
        self._nearest[n] = found
        return found

    def similarity(self, store: Store, keys: Sequence[int]) -> dict[int, float]:
        """How similar each memory is to the query: its best passage's cosine, less what
        that many passages would reach by chance (:func:`passage_similarity`)."""
        missing = [key for key in dict.fromkeys(keys) if key not in self._similarity]
        if missing:
            own = store.vectors(self.profile, missing) @ self.vector
            further = store.passages(self.profile, missing)
            for key, cosine in zip(missing, own.tolist(), strict=True):
                rest = further.get(key)
                self._similarity[key] = (
                    cosine
                    if rest is None
                    else passage_similarity(cosine, (rest @ self.vector).tolist())
                )
        return {key: self._similarity[key] for key in keys}


def passage_similarity(first: float, further: Sequence[float]) -> float:
    """The similarity of a memory read as ``n`` passages (cosines ``first`` and
    ``further``): its best passage, less what the best of ``n`` passages unrelated to the
    question would reach by chance, the expected maximum of ``n`` draws::

        similarity = max_i cos_i - CHANCE_SPREAD * sqrt(2 ln n)

    A memory of one passage keeps its cosine. Without the correction, a long text (a
    pasted document, an assistant's long answer) would outrank short ones on luck: each
    of its passages is one more chance to resemble the question.
    """
    if not further:
        return first
    n = 1 + len(further)
    return max(first, *further) - CHANCE_SPREAD * math.sqrt(2.0 * math.log(n))


class Channel(Protocol):
    name: str
    #: Whether a hit from this channel alone counts as primary evidence (see fusion).
    primary: bool
    #: Whether the channel reads neither ``Query.vector`` nor ``Query.prior``: the engine
    #: then runs it while the question is still being embedded.
    standalone: bool

    def health(self) -> Health: ...

    def candidates(self, query: Query, k: int) -> list[Hit]:
        """Up to ``k`` hits, best first, ranks 1..n, ties broken by key."""
        ...


def ranked(scored: list[tuple[int, float]], k: int) -> list[Hit]:
    """Hits from (key, score) pairs: highest score first, ties by key, ranks from 1."""
    ordered = sorted(scored, key=lambda p: (-p[1], p[0]))[:k]
    return [Hit(key, rank, score) for rank, (key, score) in enumerate(ordered, start=1)]


def ranked_arrays(
    keys: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], k: int
) -> list[Hit]:
    """:func:`ranked` for parallel arrays of keys and scores (same order, same ties). Only
    the scores at or above the ``k``-th highest are sorted: ties at the cut are kept, so
    they are broken by key as over all pairs."""
    if 0 < k < len(keys):
        cut = np.partition(scores, len(scores) - k)[len(scores) - k]
        chosen = scores >= cut
        keys, scores = keys[chosen], scores[chosen]
    order = np.lexsort((keys, -scores))[:k]
    return [
        Hit(key, rank, score)
        for rank, (key, score) in enumerate(
            zip(keys[order].tolist(), scores[order].tolist(), strict=True), start=1
        )
    ]
