"""Evidence for each fused candidate, on scales that do not depend on the query, and the
evidence floor: the contract's ``relevance_score`` and what abstention is decided on
(docs/scoring.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from slm.channels import Context, Hit
from slm.models import to_micros
from slm.recall import fusion
from slm.settings import Settings
from slm.store import times_in

#: A standing statement whose scope is at least this similar to the request applies to it:
#: primary evidence for the memory stating it.
APPLIES = 0.35


class Evidence(NamedTuple):  # a tuple: built for every candidate of every recall
    cosine: float
    lexical: float
    temporal: bool
    relevance: float
    primary: bool


def weigh_evidence(
    context: Context, keys: Sequence[int], settings: Settings, applies: Sequence[Hit] = ()
) -> dict[int, Evidence]:
    """Semantic, lexical and temporal evidence for each candidate, on query-independent scales.

    Semantic evidence is a margin: the candidate's cosine minus the query's average cosine to
    the rest of the profile, so chatty stores (where everything is a bit similar to
    everything) and terse ones (where nothing is) are held to the same standard. A memory
    stating a standing instruction or preference the request falls under (``applies``:
    the hits of channels whose role is ``"applies"``, scored by the cosine between request
    and scope) counts that cosine as its own, and the rule applying as primary evidence.
    """
    if not keys:
        return {}
    query = context.query
    similarity = context.similarity(keys)
    applying: set[int] = set()
    for hit in applies:
        if hit.key in similarity and hit.score >= APPLIES:
            applying.add(hit.key)
            similarity[hit.key] = max(similarity[hit.key], hit.score)
    cosine = np.array([similarity[key] for key in keys], dtype=np.float64)
    mean, count = context.vectors.mean(query.profile)
    total = float(mean @ query.vector) * count
    in_window = _in_window(context, keys)
    temporal = np.fromiter((key in in_window for key in keys), bool, len(keys))
    lexicon = context.lexicon
    if query.terms:
        held = lexicon.matched(keys)
        lexical = fusion.lexical_coverages(query.terms, [held[key] for key in keys], lexicon.idf)
    else:
        lexical = np.zeros(len(keys), dtype=np.float64)
    low, high = settings.relevance_cos_low, settings.relevance_cos_high
    semantic = fusion.semantic_strength(cosine, low, high)
    background = fusion.background(total, count, cosine)
    primary = (
        (cosine - background >= settings.semantic_floor)
        | (lexical >= settings.lexical_floor)
        | temporal
        | np.fromiter((key in applying for key in keys), bool, len(keys))
    )
    score = fusion.relevance(semantic, lexical, temporal.astype(np.float64))
    return {
        key: Evidence._make(row)
        for key, *row in zip(
            keys,
            cosine.tolist(),
            lexical.tolist(),
            temporal.tolist(),
            score.tolist(),
            primary.tolist(),
            strict=True,
        )
    }


def _in_window(context: Context, keys: Sequence[int]) -> set[int]:
    """Candidates whose event time or a referenced date falls in the query's time window."""
    window = context.query.window
    if window is None:
        return set()
    start, end = to_micros(window.start), to_micros(window.end)
    return set(times_in(context.store, context.query.profile, keys, start, end))


def admitted(
    context: Context, evidence: Mapping[int, Evidence], supports: Sequence[Hit]
) -> dict[int, str]:
    """Candidates that pass the evidence floor: key -> ``"primary"`` or ``"supported"``.

    A candidate without evidence of its own is admitted only when a channel whose role is
    ``"supports"`` (spreading activation) reached it and it is linked (neighbouring turn or
    semantic neighbour) to a candidate with primary evidence: the turn after the one that
    matches, for example.
    """
    passed = {key: "primary" for key, e in evidence.items() if e.primary}
    if not passed:
        return {}
    reached = [hit.key for hit in supports if hit.key in evidence and hit.key not in passed]
    for key, edges in context.graph.edges(reached).items():
        if any(neighbour in passed for neighbour, _, _ in edges):
            passed[key] = "supported"
    return passed
