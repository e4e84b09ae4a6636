"""The recall pipeline: run the channels, fuse, weigh the evidence, apply the floor.

Each step is a small function; :func:`run_recall` strings them together and records what
happened in a trace, so the result of every recall can be explained after the fact.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from slm import fusion
from slm.channels import Channel, Hit, Query
from slm.channels.bm25 import idf
from slm.contract import EVIDENCE_FLOOR, NO_CANDIDATES, ChannelRank, RecallResponse, RecallResult
from slm.models import MemoryRecord
from slm.settings import Settings
from slm.store import Store
from slm.text import terms as text_terms

log = logging.getLogger(__name__)


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
    relevance: float
    primary: bool


def run_channels(
    channels: Mapping[str, Channel], enabled: Sequence[str], query: Query, k: int
) -> list[ChannelRun]:
    """Run every enabled, healthy channel; a channel that raises is recorded, not dropped."""
    runs: list[ChannelRun] = []
    for name, channel in channels.items():
        if name not in enabled:
            runs.append(ChannelRun(name, ran=False, reason="disabled"))
            continue
        health = channel.health()
        if not health.healthy:
            runs.append(ChannelRun(name, ran=False, reason=health.reason))
            continue
        start = time.perf_counter()
        try:
            hits = tuple(channel.candidates(query, k))
        except Exception as exc:  # reported in trace and health; the recall goes on
            log.warning("channel %s failed: %s", name, exc, exc_info=True)
            runs.append(
                ChannelRun(name, ran=False, reason="error", error=f"{type(exc).__name__}: {exc}")
            )
            continue
        runs.append(ChannelRun(name, ran=True, hits=hits, ms=(time.perf_counter() - start) * 1000))
    return runs


def weigh_evidence(
    store: Store, query: Query, records: Mapping[int, MemoryRecord], settings: Settings
) -> dict[int, Evidence]:
    """Semantic and lexical evidence for each candidate, on query-independent scales."""
    keys = list(records)
    if not keys:
        return {}
    cosines = store.vectors(query.profile, keys) @ query.vector
    stats = store.lexical_stats(query.profile, query.terms)
    term_idf = {t: idf(stats.n_docs, stats.df.get(t, 0)) for t in query.terms}
    out: dict[int, Evidence] = {}
    for key, cosine in zip(keys, np.asarray(cosines, dtype=np.float64).tolist(), strict=True):
        lexical = fusion.lexical_coverage(
            query.terms, set(text_terms(records[key].content)), term_idf
        )
        semantic = fusion.semantic_strength(
            cosine, settings.relevance_cos_low, settings.relevance_cos_high
        )
        primary = cosine >= settings.semantic_floor or lexical >= settings.lexical_floor
        out[key] = Evidence(cosine, lexical, fusion.relevance(semantic, lexical), primary)
    return out


def run_recall(
    store: Store,
    channels: Mapping[str, Channel],
    settings: Settings,
    query: Query,
    k: int,
    *,
    want_trace: bool,
) -> RecallResponse:
    start = time.perf_counter()
    runs = run_channels(channels, settings.channels, query, settings.candidates_per_channel)
    rankings = {run.name: run.hits for run in runs if run.ran}
    weights = {name: settings.weight(name) for name in rankings}
    fused = fusion.weighted_rrf(rankings, weights, settings.rrf_k)
    records = store.get_by_keys(query.profile, fused)
    fused = {key: score for key, score in fused.items() if key in records}
    evidence = weigh_evidence(store, query, records, settings)
    survivors = {key: score for key, score in fused.items() if evidence[key].primary}
    ordered = fusion.order(survivors)[:k]
    provenance = _provenance(rankings)
    trust = _trust(store, query.profile, [records[key] for key in ordered], settings)
    results = tuple(
        RecallResult(
            memory=records[key],
            relevance_score=evidence[key].relevance,
            ranking_score=survivors[key],
            trust_score=trust[records[key].source or ""],
            rank_position=position,
            channels=provenance.get(key, {}),
        )
        for position, key in enumerate(ordered, start=1)
    )
    reason = None
    if not fused:
        reason = NO_CANDIDATES
    elif not results:
        reason = EVIDENCE_FLOOR
    trace = None
    if want_trace:
        trace = _trace(query, settings, runs, weights, records, evidence, results, start)
    return RecallResponse(
        query=query.text,
        results=results,
        abstained=reason is not None,
        abstention_reason=reason,
        trace=trace,
        legacy_aliases=settings.legacy_aliases,
    )


def _provenance(rankings: Mapping[str, Sequence[Hit]]) -> dict[int, dict[str, ChannelRank]]:
    out: dict[int, dict[str, ChannelRank]] = {}
    for name, hits in rankings.items():
        for hit in hits:
            out.setdefault(hit.key, {})[name] = ChannelRank(hit.rank, hit.score)
    return out


def _trust(
    store: Store, profile: str, records: Sequence[MemoryRecord], settings: Settings
) -> dict[str, float]:
    sources = {r.source or "" for r in records}
    counts = store.source_feedback(profile, sources)
    return {
        s: fusion.source_trust(*counts.get(s, (0, 0)), prior=settings.trust_prior) for s in sources
    }


def _trace(
    query: Query,
    settings: Settings,
    runs: Sequence[ChannelRun],
    weights: Mapping[str, float],
    records: Mapping[int, MemoryRecord],
    evidence: Mapping[int, Evidence],
    results: Sequence[RecallResult],
    start: float,
) -> dict[str, Any]:
    def ident(key: int) -> str | None:
        return records[key].id if key in records else None

    return {
        "query": {"text": query.text, "terms": list(query.terms), "now": query.now.isoformat()},
        "channels": {
            run.name: {
                "ran": run.ran,
                "reason": run.reason,
                "error": run.error,
                "ms": round(run.ms, 3),
                "candidates": [
                    {"id": ident(h.key), "rank": h.rank, "score": round(h.score, 6)}
                    for h in run.hits
                ],
            }
            for run in runs
        },
        "fusion": {"method": "weighted_rrf", "k": settings.rrf_k, "weights": dict(weights)},
        "evidence_floor": {
            "semantic_cosine": settings.semantic_floor,
            "lexical_coverage": settings.lexical_floor,
            "candidates": len(evidence),
            "passed": sum(1 for e in evidence.values() if e.primary),
        },
        "results": [
            {
                "id": r.memory.id,
                "rank_position": r.rank_position,
                "channels": {
                    n: {"rank": c.rank, "score": round(c.score, 6)} for n, c in r.channels.items()
                },
                "cosine": round(evidence[r.memory.key].cosine, 6),
                "lexical_coverage": round(evidence[r.memory.key].lexical, 6),
            }
            for r in results
        ],
        "total_ms": round((time.perf_counter() - start) * 1000, 3),
    }
