"""Fusion and scoring: pure functions, each with its formula.

The engine ranks by weighted reciprocal-rank fusion (:func:`weighted_rrf`) and reports,
beside that ordering key, a bounded ``relevance_score`` built from evidence that means the
same thing for every query (:func:`relevance`): how similar the memory is to the question,
and how much of the question's specific vocabulary it contains.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from slm.channels.base import Hit

#: A score, or an array of scores (one per candidate): the formulas below read both.
Number = TypeVar("Number", float, npt.NDArray[np.float64])

#: Weights of lexical coverage and a time-window match in the relevance noisy-or.
LEXICAL_RELEVANCE_WEIGHT = 0.6
TEMPORAL_RELEVANCE_WEIGHT = 0.3


def weighted_rrf(
    rankings: Mapping[str, Sequence[Hit]], weights: Mapping[str, float], k: float
) -> dict[int, float]:
    """Weighted reciprocal-rank fusion (Cormack, Clarke & Buettcher 2009)::

        rrf(d) = sum over channels c that ranked d of  w_c / (k + rank_c(d))

    Ranks are 1-based. A document missing from a channel's list gets nothing from it.
    """
    fused: dict[int, float] = {}
    for channel, hits in rankings.items():
        weight = weights[channel]
        for hit in hits:
            fused[hit.key] = fused.get(hit.key, 0.0) + weight / (k + hit.rank)
    return fused


def shares(
    channels: Mapping[str, Any], weights: Mapping[str, float], k: float
) -> dict[str, tuple[float, float]]:
    """Each channel's part of one result's fused score, ``w_c / (k + rank_c)``, and its
    share of their sum, by channel (``channels``: name -> something with a ``rank``)."""
    parts = {name: weights.get(name, 1.0) / (k + c.rank) for name, c in channels.items()}
    total = sum(parts.values()) or 1.0
    return {name: (part, part / total) for name, part in parts.items()}


def semantic_strength(cosine: Number, low: float, high: float) -> Number:
    """Cosine similarity mapped linearly onto 0..1: ``clip((cos - low) / (high - low), 0, 1)``
    (a cosine, or an array of them).

    ``low`` is where unrelated texts sit for the model, ``high`` where paraphrases start.
    """
    clipped: Number = np.clip((cosine - low) / (high - low), 0.0, 1.0)
    return clipped


#: Prior for the background similarity: a profile of a few memories is a noisy estimate of
#: it, so it is pulled toward 0 as if BACKGROUND_PRIOR_WEIGHT unrelated memories were added.
BACKGROUND_PRIOR = 0.0
BACKGROUND_PRIOR_WEIGHT = 20


def background(total: float, count: int, cosine: Number) -> Number:
    """The query's mean cosine to the other memories of the profile (leave-one-out), shrunk
    toward a prior for small profiles, where a few memories are a noisy estimate::

        background = (total - cos(d)) / (N - 1 + 20)

    ``total`` is the sum of cosines over all N memories, ``N * (query . mean vector)``;
    ``cosine`` is one candidate's, or an array of them.
    """
    others = max(count - 1, 0)
    rest = total - cosine if others else cosine * 0.0
    prior = BACKGROUND_PRIOR_WEIGHT * BACKGROUND_PRIOR
    return (rest + prior) / (others + BACKGROUND_PRIOR_WEIGHT)


def lexical_coverage(
    query_terms: Iterable[str], doc_terms: set[str], term_idf: Mapping[str, float]
) -> float:
    """IDF-weighted share of the query's terms present in the document::

        coverage = sum_{t in q, t in d} idf(t) / sum_{t in q} idf(t)

    0 when the query has no terms. Rare words count more than common ones.
    """
    return float(lexical_coverages(query_terms, [doc_terms], term_idf)[0])


def lexical_coverages(
    query_terms: Iterable[str], docs_terms: Sequence[set[str]], term_idf: Mapping[str, float]
) -> npt.NDArray[np.float64]:
    """:func:`lexical_coverage` of each of several documents, as an array (each sum taken
    term by term in the query's order, as a loop over them would)."""
    total = 0.0
    matched = np.zeros(len(docs_terms), dtype=np.float64)
    for term in query_terms:
        weight = term_idf.get(term, 0.0)
        total += weight
        matched += weight * np.fromiter((term in d for d in docs_terms), bool, len(docs_terms))
    if total <= 0:
        return np.zeros(len(docs_terms), dtype=np.float64)
    out: npt.NDArray[np.float64] = matched / total
    return out


def relevance(semantic: Number, lexical: Number, temporal: float | Number = 0.0) -> Number:
    """Bounded relevance from the evidence strengths (each 0..1), as a noisy-or::

        relevance = 1 - (1 - semantic) * (1 - 0.6 * lexical) * (1 - 0.3 * temporal)

    0 when no kind of evidence is present, 1 only for a near-paraphrase; agreement of kinds
    scores higher than any alone. The inputs are query-independent scales, so a score means
    roughly the same across queries (it is not a probability). Each input is a number or
    an array of them (one per candidate).
    """
    return 1.0 - (
        (1.0 - semantic)
        * (1.0 - LEXICAL_RELEVANCE_WEIGHT * lexical)
        * (1.0 - TEMPORAL_RELEVANCE_WEIGHT * temporal)
    )


#: How strongly each kind of edge to a leader carries the graph boost: the turn right after
#: a leading memory is often its answer; the turn before it and semantic neighbours less so.
EDGE_WEIGHTS: Mapping[str, float] = {"prev": 1.0, "next": 0.5, "similar": 0.5}


def entity_graph_boost(
    query_entities: Sequence[frozenset[int]],
    candidate_entities: Mapping[int, frozenset[int]],
    adjacency: Mapping[int, Mapping[int, str]],
    leaders: Mapping[int, float],
    entity_weight: float,
    graph_weight: float,
    speakers: Mapping[int, frozenset[int]],
    speaker_weight: float,
    relevance: Mapping[int, float],
) -> dict[int, float]:
    """Post-fusion boost for each candidate (only candidates; it never adds one)::

        boost(d) = entity_weight * shared(d) / |Q|
                 + speaker_weight * relevance(d) * spoken(d) / |Q|
                 + graph_weight * max over leaders L linked to d of  lead(L) * w(edge d -> L)

    ``Q`` holds the query's entities (each a set of stored entity ids, aliases included),
    ``shared(d)`` counts those the candidate mentions and ``spoken(d)`` those that are its
    speaker: in a conversation, what a person said is what a question about them is answered
    by (on LoCoMo dev, 96% of the evidence turns of questions naming one speaker are that
    speaker's), while the other side's turns name them only to address them. Being the speaker
    counts in proportion to the candidate's own ``relevance_score``: a greeting by the person
    asked about carries no evidence and gets almost nothing. Leaders are the
    top fused candidates, ``lead(L)`` their fused score relative to the best one (0..1), and
    ``w`` the :data:`EDGE_WEIGHTS` of the edge kind, seen from ``d`` (``prev``: d is the turn
    after L).
    """
    boosts: dict[int, float] = {}
    for key, mentioned in candidate_entities.items():
        shared = sum(1 for group in query_entities if group & mentioned)
        said = speakers.get(key, frozenset())
        spoken = sum(1 for group in query_entities if group & said)
        entity = (
            (entity_weight * shared + speaker_weight * relevance.get(key, 0.0) * spoken)
            / len(query_entities)
            if query_entities
            else 0.0
        )
        links = adjacency.get(key, {})
        graph = max(
            (
                lead * EDGE_WEIGHTS.get(links[leader], 0.0)
                for leader, lead in leaders.items()
                if leader != key and leader in links
            ),
            default=0.0,
        )
        boosts[key] = entity + graph_weight * graph
    return boosts


def role_boost(
    roles: Mapping[int, str | None],
    asked: str | None,
    relevance: Mapping[int, float],
    weight: float,
) -> dict[int, float]:
    """Post-fusion boost for the candidates in the role a question asks about::

        boost(d) = weight * relevance(d)   when role(d) == asked, else 0

    only among candidates of a conversation between two roles (both occur among them):
    in a user-assistant chat, "when does my sprint end?" is answered by what the user
    said, which the assistant's replies repeat at length. Like the speaker boost, it
    counts in proportion to the candidate's own ``relevance_score``.
    """
    if asked is None or len({role for role in roles.values() if role is not None}) < 2:
        return {}
    return {key: weight * relevance.get(key, 0.0) for key, role in roles.items() if role == asked}


def source_trust(useful: int, not_useful: int, prior: tuple[float, float]) -> float:
    """Posterior mean of a Beta(alpha, beta) prior after feedback on a source's memories::

    trust = (alpha + useful) / (alpha + beta + useful + not_useful)
    """
    alpha, beta = prior
    return (alpha + useful) / (alpha + beta + useful + not_useful)


def order(scores: Mapping[int, float]) -> list[int]:
    """Keys by descending score, exact ties broken by descending key: the memory stored
    later first (deterministic; a later statement is the likelier to hold)."""
    return sorted(scores, key=lambda key: (-scores[key], -key))
