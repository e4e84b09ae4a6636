"""The recall pipeline: run the channels, fuse, weigh the evidence, enhance, apply the floor.

Each step is a small function; :func:`run_recall` strings them together and records what
happened in a trace, so the result of every recall can be explained after the fact.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from slm import fusion
from slm.channels import Channel, Hit, Query
from slm.channels.temporal import times_in
from slm.contract import EVIDENCE_FLOOR, NO_CANDIDATES, ChannelRank, RecallResponse, RecallResult
from slm.ingest.roles import asked_about, role_of
from slm.models import MemoryRecord, to_micros
from slm.settings import Settings
from slm.store import Store

log = logging.getLogger(__name__)

#: A standing statement whose scope is at least this similar to the request applies to it:
#: primary evidence for the memory stating it.
APPLIES = 0.35

#: Candidates linked to one of this many top fused candidates get the graph boost.
LEADERS = 3
#: Only this many top survivors are considered for the entity-graph boost: the boost is
#: small next to fusion scores and cannot lift a candidate from further down.
BOOSTED = 50


@dataclass(frozen=True, slots=True)
class ChannelRun:
    name: str
    ran: bool
    hits: tuple[Hit, ...] = ()
    ms: float = 0.0
    reason: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Evidence:
    cosine: float
    lexical: float
    temporal: bool
    relevance: float
    primary: bool


def run_channels(
    channels: Mapping[str, Channel],
    enabled: Sequence[str],
    query: Query,
    k: int,
    done: Mapping[str, ChannelRun] = MappingProxyType({}),
) -> list[ChannelRun]:
    """Run every enabled, healthy channel in order, each seeing the hits of those before it.

    Channels in ``done`` already ran (see :func:`run_standalone`): their runs are taken as
    they are. A channel that raises is recorded with its error (trace and health), never
    dropped silently.
    """
    runs: list[ChannelRun] = []
    prior: dict[str, tuple[Hit, ...]] = {}
    for name, channel in channels.items():
        run = done.get(name)
        if run is None:
            run = _run_one(name, channel, enabled, replace(query, prior=MappingProxyType(prior)), k)
        if run.ran:
            prior = {**prior, name: run.hits}
        runs.append(run)
    return runs


def run_standalone(
    channels: Mapping[str, Channel], enabled: Sequence[str], query: Query, k: int
) -> dict[str, ChannelRun]:
    """Run the channels that need neither the query vector nor other channels' hits
    (``Channel.standalone``): the engine runs them while the question is being embedded."""
    return {
        name: _run_one(name, channel, enabled, query, k)
        for name, channel in channels.items()
        if channel.standalone
    }


def _run_one(
    name: str, channel: Channel, enabled: Sequence[str], query: Query, k: int
) -> ChannelRun:
    if name not in enabled:
        return ChannelRun(name, ran=False, reason="disabled")
    health = channel.health()
    if not health.healthy:
        return ChannelRun(name, ran=False, reason=health.reason)
    start = time.perf_counter()
    try:
        hits = tuple(channel.candidates(query, k))
    except Exception as exc:  # reported in trace and health; the recall goes on
        log.warning("channel %s failed: %s", name, exc, exc_info=True)
        return ChannelRun(name, ran=False, reason="error", error=f"{type(exc).__name__}: {exc}")
    return ChannelRun(name, ran=True, hits=hits, ms=(time.perf_counter() - start) * 1000)


def weigh_evidence(
    store: Store,
    query: Query,
    keys: Sequence[int],
    settings: Settings,
    applies: Sequence[Hit] = (),
) -> dict[int, Evidence]:
    """Semantic, lexical and temporal evidence for each candidate, on query-independent scales.

    Semantic evidence is a margin: the candidate's cosine minus the query's average cosine to
    the rest of the profile, so chatty stores (where everything is a bit similar to
    everything) and terse ones (where nothing is) are held to the same standard. A memory
    stating a standing instruction or preference the request falls under (``applies``:
    the standing channel's hits, scored by the cosine between request and scope) counts
    that cosine as its own, and the rule applying as primary evidence.
    """
    if not keys:
        return {}
    similarity = query.similarity(store, keys)
    applying: set[int] = set()
    for hit in applies:
        if hit.key in similarity and hit.score >= APPLIES:
            applying.add(hit.key)
            similarity[hit.key] = max(similarity[hit.key], hit.score)
    cosines = [similarity[key] for key in keys]
    mean, count = store.mean_vector(query.profile)
    total = float(mean @ query.vector) * count
    in_window = _in_window(store, query, keys)
    lexicon = query.lexicon
    asked = set(query.terms)
    held = lexicon.matched(keys) if lexicon is not None and asked else {}
    out: dict[int, Evidence] = {}
    for key, cosine in zip(keys, cosines, strict=True):
        lexical = (
            fusion.lexical_coverage(query.terms, held[key], lexicon.idf)
            if lexicon is not None and asked
            else 0.0
        )
        semantic = fusion.semantic_strength(
            cosine, settings.relevance_cos_low, settings.relevance_cos_high
        )
        temporal = key in in_window
        background = fusion.background(total, count, cosine)
        primary = (
            cosine - background >= settings.semantic_floor
            or lexical >= settings.lexical_floor
            or temporal
            or key in applying
        )
        score = fusion.relevance(semantic, lexical, 1.0 if temporal else 0.0)
        out[key] = Evidence(cosine, lexical, temporal, score, primary)
    return out


def _in_window(store: Store, query: Query, keys: Sequence[int]) -> set[int]:
    """Candidates whose event time or a referenced date falls in the query's time window."""
    if query.window is None:
        return set()
    start, end = to_micros(query.window.start), to_micros(query.window.end)
    return set(times_in(store, query.profile, keys, start, end))


def admitted(
    store: Store, query: Query, evidence: Mapping[int, Evidence], spread: Sequence[Hit]
) -> dict[int, str]:
    """Candidates that pass the evidence floor: key -> ``"primary"`` or ``"supported"``.

    A candidate without evidence of its own is admitted only when spreading activation
    reached it and it is linked (neighbouring turn or semantic neighbour) to a candidate
    with primary evidence: the turn after the one that matches, for example.
    """
    passed = {key: "primary" for key, e in evidence.items() if e.primary}
    if not passed:
        return {}
    reached = [hit.key for hit in spread if hit.key in evidence and hit.key not in passed]
    for key, edges in query.graph_view(store).edges(reached).items():
        if any(neighbour in passed for neighbour, _, _ in edges):
            passed[key] = "supported"
    return passed


def entity_graph_boosts(
    store: Store,
    query: Query,
    fused: Mapping[int, float],
    evidence: Mapping[int, Evidence],
    settings: Settings,
) -> dict[int, float]:
    keys = list(fused)
    if not keys:
        return {}
    groups = [frozenset(e for e, _ in matches) for matches in query.entity_ids.values()]
    graph = query.graph_view(store)
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


def run_recall(
    store: Store,
    channels: Mapping[str, Channel],
    settings: Settings,
    query: Query,
    k: int,
    *,
    want_trace: bool,
    early: Mapping[str, ChannelRun] = MappingProxyType({}),
) -> tuple[RecallResponse, list[ChannelRun]]:
    """One recall from an interpreted query; ``early`` holds the runs of standalone channels
    made while the question was embedded (:func:`run_standalone`)."""
    start = time.perf_counter()
    runs = run_channels(channels, settings.channels, query, settings.candidates_per_channel, early)
    rankings = {run.name: run.hits for run in runs if run.ran}
    weights = {name: settings.weight(name) for name in rankings}
    fused = fusion.weighted_rrf(rankings, weights, settings.rrf_k)
    evidence = weigh_evidence(store, query, list(fused), settings, rankings.get("standing", ()))
    passed = admitted(store, query, evidence, rankings.get("spreading", ()))
    survivors = {key: fused[key] for key in passed}
    leading = dict.fromkeys(fusion.order(survivors)[:BOOSTED])
    boosted = {k: survivors[k] for k in leading}
    records = store.get_by_keys(query.profile, leading)
    boosts = entity_graph_boosts(store, query, boosted, evidence, settings)
    roles = fusion.role_boost(
        {key: role_of(r.content, r.source) for key, r in records.items()},
        asked_about(query.text),
        {key: evidence[key].relevance for key in records},
        settings.role_boost,
    )
    ranking = {
        key: score
        + boosts.get(key, 0.0)
        + roles.get(key, 0.0)
        + settings.evidence_weight * evidence[key].relevance
        for key, score in survivors.items()
    }
    # A forget racing this recall can remove a candidate: hydrate, then keep what exists.
    top = fusion.order(ranking)[: k + 8]
    records.update(store.get_by_keys(query.profile, [key for key in top if key not in records]))
    ordered = [key for key in top if key in records][:k]
    provenance = _provenance(rankings, ordered)
    trust = _trust(store, query.profile, [records[key] for key in ordered], settings)
    results = tuple(
        RecallResult(
            memory=records[key],
            relevance_score=evidence[key].relevance,
            ranking_score=ranking[key],
            trust_score=trust[records[key].source or ""],
            rank_position=position,
            channels=provenance[key],
        )
        for position, key in enumerate(ordered, start=1)
    )
    reason = NO_CANDIDATES if not fused else (EVIDENCE_FLOOR if not results else None)
    trace = None
    if want_trace:
        ids = _ids(store, query, runs)
        trace = {
            "query": _interpretation(query),
            "channels": {run.name: _run_trace(run, ids) for run in runs},
            "fusion": {"method": "weighted_rrf", "k": settings.rrf_k, "weights": dict(weights)},
            "evidence_floor": {
                "semantic_cosine": settings.semantic_floor,
                "lexical_coverage": settings.lexical_floor,
                "candidates": len(evidence),
                "passed": len(passed),
            },
            "results": [
                _result_trace(r, evidence[r.memory.key], passed, boosts, roles) for r in results
            ],
            "total_ms": round((time.perf_counter() - start) * 1000, 3),
        }
    response = RecallResponse(
        query=query.text,
        results=results,
        abstained=reason is not None,
        abstention_reason=reason,
        trace=trace,
        legacy_aliases=settings.legacy_aliases,
    )
    return response, runs


def _provenance(
    rankings: Mapping[str, Sequence[Hit]], keys: Sequence[int]
) -> dict[int, dict[str, ChannelRank]]:
    """Each channel's rank and score for each of ``keys`` (the results, not every hit)."""
    out: dict[int, dict[str, ChannelRank]] = {key: {} for key in keys}
    for name, hits in rankings.items():
        for hit in hits:
            if hit.key in out:
                out[hit.key][name] = ChannelRank(hit.rank, hit.score)
    return out


def _trust(
    store: Store, profile: str, records: Sequence[MemoryRecord], settings: Settings
) -> dict[str, float]:
    sources = {r.source or "" for r in records}
    counts = store.source_feedback(profile, sources)
    return {
        s: fusion.source_trust(*counts.get(s, (0, 0)), prior=settings.trust_prior) for s in sources
    }


def _interpretation(query: Query) -> dict[str, Any]:
    window = query.window
    return {
        "text": query.text,
        "embedded_text": query.embedded_text or query.text,
        "terms": list(query.terms),
        "now": query.now.isoformat(),
        "entities": {
            name: [entity for entity, _ in matches] for name, matches in query.entity_ids.items()
        }
        | {name: [] for name in query.entities if name not in query.entity_ids},
        "time_window": None
        if window is None
        else {
            "start": window.start.isoformat(),
            "end": window.end.isoformat(),
            "text": window.text,
            "granularity": window.granularity,
        },
        "when_question": query.when,
    }


def _ids(store: Store, query: Query, runs: Sequence[ChannelRun]) -> dict[int, str]:
    keys = {hit.key for run in runs for hit in run.hits}
    return {key: record.id for key, record in store.get_by_keys(query.profile, keys).items()}


def _run_trace(run: ChannelRun, ids: Mapping[int, str]) -> dict[str, Any]:
    return {
        "ran": run.ran,
        "reason": run.reason,
        "error": run.error,
        "ms": round(run.ms, 3),
        "candidates": [
            {
                "id": ids.get(h.key),
                "rank": h.rank,
                "score": round(h.score, 6),
            }
            for h in run.hits
        ],
    }


def _result_trace(
    result: RecallResult,
    evidence: Evidence,
    passed: Mapping[int, str],
    boosts: Mapping[int, float],
    roles: Mapping[int, float],
) -> dict[str, Any]:
    key = result.memory.key
    return {
        "id": result.memory.id,
        "rank_position": result.rank_position,
        "channels": {
            name: {"rank": c.rank, "score": round(c.score, 6)}
            for name, c in result.channels.items()
        },
        "evidence": passed[key],
        "cosine": round(evidence.cosine, 6),
        "lexical_coverage": round(evidence.lexical, 6),
        "time_window_match": evidence.temporal,
        "entity_graph_boost": round(boosts.get(key, 0.0), 6),
        "role_boost": round(roles.get(key, 0.0), 6),
    }
