"""The trace of a recall: how the question was read, what each channel found, how fusion
weighed them and why each result is there."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from slm.channels import Query
from slm.contract import RecallResult
from slm.recall.evidence import Evidence
from slm.recall.run import ChannelRun
from slm.store import Store


def interpretation(query: Query) -> dict[str, Any]:
    window = query.window
    return {
        "text": query.text,
        "first_person": query.first_person,
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
        "asks_about_past": query.past,
        "facts_asked": list(query.asked),
    }


def trace_ids(store: Store, query: Query, runs: Sequence[ChannelRun]) -> dict[int, str]:
    keys = {hit.key for run in runs for hit in run.hits}
    return {key: record.id for key, record in store.get_by_keys(query.profile, keys).items()}


def run_trace(run: ChannelRun, ids: Mapping[int, str]) -> dict[str, Any]:
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


def result_trace(
    result: RecallResult,
    evidence: Evidence,
    passed: Mapping[int, str],
    boosted: Mapping[str, Mapping[int, float]],
    shares: Mapping[str, tuple[float, float]],
    features: Mapping[str, float] | None,
    relevance_from: str | None = None,
) -> dict[str, Any]:
    """Why one result is there: each channel's rank, raw score, part of the fused score
    and share of it; the evidence that admitted it; where its relevance came from (its
    own evidence, or ``relevance_from``: the id of the older version of its fact whose
    relevance it carries, docs/scoring.md); the boosts it got; and, when the reranker read
    it, its features by name (the reading features among them: ``answer_type``, ``focus``,
    ``channels``; docs/reading.md)."""
    key = result.memory.key
    boosts, roles, facts = boosted["boosts"], boosted["roles"], boosted["facts"]
    return {
        "id": result.memory.id,
        "rank_position": result.rank_position,
        "channels": {
            name: {
                "rank": c.rank,
                "score": round(c.score, 6),
                "part": round(shares[name][0], 6),
                "share": round(shares[name][1], 6),
            }
            for name, c in result.channels.items()
        },
        "evidence": passed[key],
        "relevance_from": relevance_from,
        "cosine": round(evidence.cosine, 6),
        "lexical_coverage": round(evidence.lexical, 6),
        "time_window_match": evidence.temporal,
        "entity_graph_boost": round(boosts.get(key, 0.0), 6),
        "role_boost": round(roles.get(key, 0.0), 6),
        "fact_boost": round(facts.get(key, 0.0), 6),
        "features": None if features is None else dict(features),
    }


class Clock:
    """Where one recall's time goes: the milliseconds of each step since the one before
    (``lap``), from when the clock was made (the recall's start)."""

    def __init__(self) -> None:
        self.started = self._last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, step: str) -> None:
        now = time.perf_counter()
        self.laps[step] = self.laps.get(step, 0.0) + (now - self._last) * 1000
        self._last = now

    def total_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def describe(self) -> dict[str, float]:
        return {step: round(ms, 3) for step, ms in self.laps.items()}
