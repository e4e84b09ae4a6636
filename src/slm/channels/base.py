"""The ``Channel`` protocol: a candidate producer the engine runs on every recall.

A channel has a name, says whether it is healthy (and why not), and turns a recall's
:class:`Context` (the interpreted :class:`Query` and what the recall has read so far) into
ranked hits with raw scores. Channels never write; they read the store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import ClassVar, Literal, Protocol

import numpy as np
import numpy.typing as npt

from slm.channels.graphview import GraphView
from slm.channels.postings import Lexicon
from slm.index import Indexes
from slm.ingest.timeexpr import TimeSpan
from slm.settings import Settings
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
    """A recall question as the engine read it (``slm.recall.interpret``): a plain value."""

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
    #: the text the query vector embeds (the question's subject, without the names of
    #: people who speak in a large share of the store)
    embedded_text: str = ""
    #: the time window the question refers to, if any
    window: TimeSpan | None = None
    #: whether the question asks when something happened
    when: bool = False
    #: the facts it asks the value of (``subject|attribute`` slots, ``slm.ingest.asked``)
    asked: tuple[str, ...] = ()
    #: whether it asks about an earlier state of things ("Where did I live before?")
    past: bool = False
    #: the question as the user a recall is for would ask it, when it names them in the
    #: third person ("Where does alice live?" -> "Where do I live?"; ``slm.recall.whose``)
    first_person: str | None = None
    #: memories superseded by the moment the question asks about: left out of the answer
    #: (``include_superseded`` keeps them)
    hidden: frozenset[int] = frozenset()
    #: whether the profile holds versions at all (probable updates, ended validity); a
    #: recall of a profile without them skips the version steps
    versioned: bool = True

    def admits(self, key: int) -> bool:
        return self.allowed is None or key in self.allowed


class Context:
    """One recall's working state, shared by its channels and steps, gone with the call:
    the store and its indexes (``vectors``: the vector indexes), the query, what the
    channels found so far (``prior``, in run order) and what the recall has read once for
    all of them (the nearest memories, each memory's similarity to the query, the query
    terms' postings, the graph around the candidates)."""

    def __init__(
        self, store: Store, indexes: Indexes, query: Query, lexicon: Lexicon | None = None
    ) -> None:
        self.store = store
        self.indexes = indexes
        self.vectors = indexes.vectors
        self.query = query
        self.lexicon = (
            lexicon if lexicon is not None else Lexicon(store, query.profile, query.terms)
        )
        self.graph = GraphView(store, indexes.edges, query.profile)
        #: hits of the channels that ran so far, by channel name
        self.prior: dict[str, tuple[Hit, ...]] = {}
        self._nearest: dict[int, list[tuple[int, float]]] = {}
        self._similarity: dict[int, float] = {}

    def nearest(self, n: int) -> list[tuple[int, float]]:
        """The ``n`` admitted memories most similar to the query (:meth:`similarity`), best
        first, ties by key, from the memories' own vectors and their further passages. One
        search serves every channel: a smaller ``n`` reads a prefix of a larger one."""
        for asked, found in self._nearest.items():
            if asked >= n or len(found) < asked:  # enough, or all there is
                return found[:n]
        query = self.query
        allowed = set(query.allowed) if query.allowed is not None else None
        own = self.vectors.search(query.profile, query.vector, n, allowed)
        further = self.vectors.passage_search(query.profile, query.vector, n, allowed)
        scores = self.similarity([key for key, _ in own] + [key for key, _ in further])
        found = best_pairs(scores, n)
        self._nearest = {n: found}
        return found

    def similarity(self, keys: Sequence[int]) -> dict[int, float]:
        """How similar each memory is to the query: its best passage's cosine, less what
        that many passages would reach by chance (:func:`passage_similarity`)."""
        missing = [key for key in dict.fromkeys(keys) if key not in self._similarity]
        if missing:
            vector, profile = self.query.vector, self.query.profile
            own = self.vectors.get(profile, missing) @ vector
            further = self.vectors.passages(profile, missing)
            for key, cosine in zip(missing, own.tolist(), strict=True):
                rest = further.get(key)
                self._similarity[key] = (
                    cosine if rest is None else passage_similarity(cosine, (rest @ vector).tolist())
                )
        return {key: self._similarity[key] for key in keys}

    def prior_keys(self) -> list[int]:
        """The admitted keys the channels so far found, in run order, repeats kept."""
        return [
            hit.key for hits in self.prior.values() for hit in hits if self.query.admits(hit.key)
        ]


def best_pairs(scores: Mapping[int, float], n: int) -> list[tuple[int, float]]:
    """The ``n`` best (key, score) pairs, highest first, ties by key (sorted as arrays:
    hundreds of pairs, where a Python sort with a key function cost 0.4 ms a call)."""
    count = len(scores)
    keys = np.fromiter(scores.keys(), dtype=np.int64, count=count)
    values = np.fromiter(scores.values(), dtype=np.float64, count=count)
    order = np.lexsort((keys, -values))[:n]
    return list(zip(keys[order].tolist(), values[order].tolist(), strict=True))


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


#: What a channel reads beyond the query's text and terms: ``"vector"`` (the query's
#: embedding) and ``"prior"`` (the hits of the channels that ran before it). A channel that
#: needs neither is *standalone*: it runs while the question is being embedded.
Need = Literal["vector", "prior"]
#: What a channel's hits are to the evidence floor: ``"plain"`` (a hit passes if the evidence
#: step finds semantic, lexical or time evidence for it), ``"applies"`` (the hit's score is
#: also its memory's semantic evidence: a standing rule that applies to the request),
#: ``"supports"`` (a hit without evidence of its own also passes when it is linked to a
#: memory with some: spreading activation reaching the reply after a matching turn).
Role = Literal["plain", "applies", "supports"]


class Channel(Protocol):
    """A candidate producer. The class carries the channel's facts; the registry
    (``slm.channels.REGISTRY``) lists the classes in run order."""

    #: unique name, used in settings, traces and results' provenance
    name: ClassVar[str]
    #: fusion weight ``w_c`` unless ``Settings.weights`` says otherwise
    weight: ClassVar[float]
    needs: ClassVar[frozenset[Need]]
    role: ClassVar[Role]
    #: the store index the channel reads (``"embeddings"``, ``"lexical"``), whose
    #: completeness its health reports; None when it reads no such index
    index: ClassVar[str | None]

    def __init__(self, settings: Settings) -> None: ...

    def health(self) -> Health: ...

    def candidates(self, context: Context, k: int) -> list[Hit]:
        """Up to ``k`` hits, best first, ranks 1..n, ties broken by key."""
        ...


class ChannelDefaults:
    """What a channel inherits unless it says otherwise: it reads nothing from the settings
    and is always healthy."""

    def __init__(self, settings: Settings) -> None:
        pass

    def health(self) -> Health:
        return Health(True)


def standalone(channel: Channel) -> bool:
    """Whether ``channel`` needs neither the query vector nor other channels' hits."""
    return not channel.needs


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
