"""Enhancement after fusion: boosts that re-order the candidates fusion produced (never add
one): the entity graph (shared entities, speakers, links to the leaders), the role a
question asks about in a user-assistant conversation, and stating the fact a question asks
about (docs/scoring.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from slm.channels import Context
from slm.ingest.roles import asked_about, role_of
from slm.models import MemoryRecord
from slm.recall import fusion
from slm.recall.evidence import Evidence
from slm.settings import Settings

#: Candidates linked to one of this many top fused candidates get the graph boost.
LEADERS = 3
#: Only this many top survivors are considered for the boosts: they are small next to fusion
#: scores and cannot lift a candidate from further down.
BOOSTED = 50


def entity_graph_boosts(
    context: Context,
    fused: Mapping[int, float],
    evidence: Mapping[int, Evidence],
    settings: Settings,
) -> dict[int, float]:
    """The entity-graph boost of the boosted candidates (``fused``: their fused scores)."""
    keys = list(fused)
    if not keys:
        return {}
    groups = [frozenset(e for e, _ in m) for m in context.query.entity_ids.values()]
    graph = context.graph
    mentioned = graph.mentions(keys)
    edges = graph.edges(keys)
    ordered = fusion.order(fused)
    best = fused[ordered[0]]
    return fusion.entity_graph_boost(
        query_entities=groups,
        candidate_entities={k: frozenset(e for e, _, _, _ in mentioned.get(k, [])) for k in keys},
        speakers={k: frozenset(e for e, _, _, s in mentioned.get(k, []) if s) for k in keys},
        adjacency={k: {n: kind for n, kind, _ in edges.get(k, [])} for k in keys},
        leaders={k: fused[k] / best for k in ordered[:LEADERS]},
        entity_weight=settings.entity_boost,
        graph_weight=settings.graph_boost,
        speaker_weight=settings.speaker_boost,
        relevance={k: evidence[k].relevance for k in keys},
    )


def fact_boosts(context: Context, keys: Iterable[int], settings: Settings) -> dict[int, float]:
    """:attr:`Settings.fact_boost` for each of ``keys`` that states a value of a fact the
    question asks about (``Query.asked``)."""
    query = context.query
    if not query.asked or not settings.fact_boost:
        return {}
    stating = context.store.versions.stating(query.profile, query.asked)
    return {key: settings.fact_boost for key in keys if key in stating}


def role_boosts(
    context: Context,
    records: Mapping[int, MemoryRecord],
    evidence: Mapping[int, Evidence],
    settings: Settings,
) -> dict[int, float]:
    """The role boost of the boosted candidates (``records``)."""
    return fusion.role_boost(
        {key: role_of(r.content, r.source) for key, r in records.items()},
        asked_about(context.query.first_person or context.query.text),
        {key: evidence[key].relevance for key in records},
        settings.role_boost,
    )
