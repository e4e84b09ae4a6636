"""Ranking a recall whose channels ran: fuse, weigh the evidence, apply the floor, boost,
hydrate, and build the score-contract response (with its trace on demand)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from slm.channels import Channel, Context, Hit, weight
from slm.contract import EVIDENCE_FLOOR, NO_CANDIDATES, ChannelRank, RecallResponse, RecallResult
from slm.learn.features import Candidates, candidates, read_features, window
from slm.learn.rerank import Reranking, reorder
from slm.models import MemoryRecord
from slm.recall import feedback, fusion, versions
from slm.recall.enhance import BOOSTED, entity_graph_boosts, fact_boosts, role_boosts
from slm.recall.evidence import admitted, weigh_evidence
from slm.recall.reader import Reader
from slm.recall.run import ChannelRun
from slm.recall.signals import recall_signals
from slm.recall.trace import interpretation, result_trace, run_trace, trace_ids
from slm.settings import Settings
from slm.store import Store


def rank(
    context: Context,
    channels: Mapping[str, Channel],
    runs: Sequence[ChannelRun],
    settings: Settings,
    k: int,
    *,
    want_trace: bool,
    started: float,
    reranking: Reranking | None = None,
    reader: Reader | None = None,
) -> RecallResponse:
    """The response of a recall whose channels ran (``runs``): fuse their rankings, weigh
    the evidence, apply the floor, boost, rerank (with ``reranking``), hydrate the top
    ``k``, and trace it all on demand (``started``: ``time.perf_counter()`` when the recall
    began)."""
    store, query = context.store, context.query
    rankings = {run.name: run.hits for run in runs if run.ran}
    weights = {name: weight(settings, channels[name]) for name in rankings}
    fused = fusion.weighted_rrf(rankings, weights, settings.rrf_k)
    moment = versions.moment_asked(query)
    leading_keys = fusion.order(fused)[: versions.LEADING] if query.versioned else []
    updates = versions.versions(store, query.profile, leading_keys)
    carried = versions.carry_forward(fused, updates, query, moment) if moment else {}
    applies = _by_role(channels, rankings, "applies")
    evidence = weigh_evidence(context, list(fused), settings, applies)
    passed = admitted(context, evidence, _by_role(channels, rankings, "supports"))
    # The current version of a fact stays when an older version passes the floor.
    passed.update((key, "newer version") for key, older in carried.items() if older in passed)
    # Superseded memories rank until the end, so that their current versions can take
    # their places (``versions.current_first``).
    survivors = {key: fused[key] for key in passed}
    leading = dict.fromkeys(fusion.order(survivors)[:BOOSTED])
    boosted = {k: survivors[k] for k in leading}
    records = store.get_by_keys(query.profile, leading)
    boosts = entity_graph_boosts(context, boosted, evidence, settings)
    roles = role_boosts(context, records, evidence, settings)
    facts = fact_boosts(context, survivors, settings)
    ranking = {
        key: score
        + boosts.get(key, 0.0)
        + roles.get(key, 0.0)
        + facts.get(key, 0.0)
        + settings.evidence_weight * evidence[key].relevance
        for key, score in survivors.items()
    }
    reranked, shift = 0, None
    seen: Candidates | None = None
    if reranking is not None and ranking:
        keys = window(ranking, fusion.order(ranking), query.hidden)
        _hydrate(store, query.profile, records, keys)
        keys = [key for key in keys if key in records]
        shown = [records[key].id for key in keys]
        marks = store.feedback_marks(query.profile, shown, reranking.marks_before)
        seen = candidates(
            context, keys, rankings, fused, evidence, passed, boosts, roles, facts, records, marks
        )
        if reranking.observe is not None:
            reranking.observe(seen)
        if reranking.ranker is not None:
            matrix = reranking.ranker.view(seen.matrix, seen.features)
            shift = reranking.ranker.shift(matrix)
            if reranking.ranker.applies(matrix):
                ranking = reorder(ranking, seen.keys, reranking.ranker.score(matrix))
                reranked = len(keys)
    read: dict[str, Any] | None = None
    if reader is not None and ranking:
        keys = [key for key in fusion.order(ranking) if key not in query.hidden][: reader.top]
        _hydrate(store, query.profile, records, keys)
        keys = [key for key in keys if key in records]
        scores, ms = reader.read(query.text, [records[key].content for key in keys])
        ranking = reorder(ranking, keys, scores)
        read = {**reader.describe(), "read": len(keys), "ms": round(ms, 3)}
    leading_now = fusion.order(ranking)[: feedback.LEADING]
    _hydrate(store, query.profile, records, leading_now)
    asked = store.feedback_asked(
        query.profile, [records[k].id for k in leading_now if k in records]
    )
    taught = feedback.apply(ranking, records, feedback.nets(query.text, asked), leading_now)
    if moment is not None and updates:
        grouped = {k for u in updates for k in (u.older, u.newer) if k in ranking}
        _hydrate(store, query.profile, records, grouped)
        versions.current_first(ranking, updates, records, moment)
    for key in query.hidden & ranking.keys():
        del ranking[key]
    # A forget racing this recall can remove a candidate: hydrate, then keep what exists.
    top = fusion.order(ranking)[: k + 8]
    _hydrate(store, query.profile, records, top)
    ordered = [key for key in top if key in records][:k]
    if query.versioned:
        covered = {u.older for u in updates}
        unseen = [key for key in ordered if key not in covered]
        updates = [*updates, *store.updates(query.profile, unseen)]
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
            possibly_superseded_by=versions.newer_ids(updates, key),
        )
        for position, key in enumerate(ordered, start=1)
    )
    reason = NO_CANDIDATES if not fused else (EVIDENCE_FLOOR if not results else None)
    trace = None
    if want_trace:
        ids = trace_ids(store, query, runs)
        trace = {
            "query": interpretation(query),
            "channels": {run.name: run_trace(run, ids) for run in runs},
            "fusion": {"method": "weighted_rrf", "k": settings.rrf_k, "weights": dict(weights)},
            "rerank": {
                "model": reranking.model_id if reranking else None,
                "origin": reranking.origin if reranking and reranking.ranker else None,
                "reordered": reranked,
                # how unlike the model's training data this window is (docs/learning.md)
                "shift": None if shift is None else round(shift, 4),
                "shift_limit": reranking.ranker.shift_limit
                if reranking and reranking.ranker
                else None,
            },
            "reader": read,
            "feedback": {
                memory.id: round(shift, 6)
                for key, shift in taught.items()
                if (memory := records.get(key)) is not None
            },
            "evidence_floor": {
                "semantic_cosine": settings.semantic_floor,
                "lexical_coverage": settings.lexical_floor,
                "candidates": len(evidence),
                "passed": len(passed),
            },
            "results": [
                result_trace(
                    r,
                    evidence[r.memory.key],
                    passed,
                    {"boosts": boosts, "roles": roles, "facts": facts},
                    fusion.shares(r.channels, weights, settings.rrf_k),
                    read_features(seen, r.memory.key),
                )
                for r in results
            ],
            "total_ms": round((time.perf_counter() - started) * 1000, 3),
        }
    response = RecallResponse(
        query=query.text,
        results=results,
        abstained=reason is not None,
        abstention_reason=reason,
        trace=trace,
        legacy_aliases=settings.legacy_aliases,
        signals=recall_signals(query, evidence, passed, rankings, ordered, k),
    )
    return response


def _hydrate(
    store: Store, profile: str, records: dict[int, MemoryRecord], keys: Iterable[int]
) -> None:
    """Read into ``records`` those of ``keys`` it does not hold yet."""
    missing = [key for key in keys if key not in records]
    if missing:
        records.update(store.get_by_keys(profile, missing))


def _by_role(
    channels: Mapping[str, Channel], rankings: Mapping[str, Sequence[Hit]], role: str
) -> list[Hit]:
    """The hits of the channels whose evidence role is ``role``."""
    return [hit for name, hits in rankings.items() if channels[name].role == role for hit in hits]


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
