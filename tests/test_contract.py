"""Score contract v2, field by field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slm import Memory, Settings
from slm.embed.minilm import MiniLMEmbedder
from slm.recall.pipeline import STAGES

RESPONSE_KEYS = {
    "score_contract_version",
    "calibration_status",
    "calibration_id",
    "answer_confidence",
    "abstained",
    "abstention_reason",
    "query",
    "query_id",
    "results",
}
RESULT_KEYS = {
    "id",
    "content",
    "event_time",
    "recorded_at",
    "source",
    "metadata",
    "tags",
    # additive (lifecycle): validity and probable updates
    "valid_from",
    "valid_to",
    "superseded_by",
    "possibly_superseded_by",
    "relevance_score",
    "ranking_score",
    "memory_confidence",
    "trust_score",
    "rank_position",
    "score",
    "confidence",
}


@pytest.fixture
def populated(real_memory: Memory) -> Memory:
    real_memory.remember(
        "Alice moved to Lisbon in March 2024",
        source="chat",
        confidence=0.8,
        event_time="2024-03-10T12:00:00Z",
        metadata={"session": 1},
        tags=["move"],
    )
    real_memory.remember("Bob adopted a golden retriever puppy named Max", source="bob")
    real_memory.remember("Alice works as a marine biologist studying octopus behaviour")
    return real_memory


def test_response_fields(populated: Memory) -> None:
    body = populated.recall("Where does Alice live?").to_dict()
    assert set(body) == RESPONSE_KEYS
    assert body["score_contract_version"] == "2"
    assert body["calibration_status"] == "uncalibrated"
    assert body["calibration_id"] is None
    assert body["answer_confidence"] is None
    assert body["abstained"] is False
    assert body["abstention_reason"] is None
    json.dumps(body)  # serialisable as is


def test_result_fields(populated: Memory) -> None:
    results = populated.recall("Where does Alice live?", k=5).to_dict()["results"]
    assert results
    top = results[0]
    assert set(top) == RESULT_KEYS
    assert top["content"] == "Alice moved to Lisbon in March 2024"
    assert top["event_time"] == "2024-03-10T12:00:00Z"
    assert top["recorded_at"].endswith("Z")
    assert top["source"] == "chat"
    assert top["metadata"] == {"session": 1}
    assert top["tags"] == ["move"]
    assert top["memory_confidence"] == 0.8
    assert top["confidence"] == top["memory_confidence"]
    assert top["score"] == top["relevance_score"]
    assert top["trust_score"] == pytest.approx(0.75)  # Beta(3, 1) prior, no feedback yet
    for position, result in enumerate(results, start=1):
        assert result["rank_position"] == position
        assert 0.0 <= result["relevance_score"] <= 1.0
    ranking = [r["ranking_score"] for r in results]
    assert ranking == sorted(ranking, reverse=True)


def test_legacy_aliases_can_be_turned_off(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    settings = Settings(legacy_aliases=False)
    with Memory(tmp_path / "m.db", embedder=minilm, settings=settings) as memory:
        memory.remember("Alice moved to Lisbon in March 2024")
        result = memory.recall("Alice Lisbon").to_dict()["results"][0]
    assert "score" not in result and "confidence" not in result
    assert set(result) == RESULT_KEYS - {"score", "confidence"}


def test_no_candidates_on_empty_store(real_memory: Memory) -> None:
    body = real_memory.recall("anything at all").to_dict()
    assert body["abstained"] is True
    assert body["abstention_reason"] == "no_candidates"
    assert body["results"] == []


def test_no_candidates_when_filters_exclude_everything(populated: Memory) -> None:
    body = populated.recall("Alice", source="nobody").to_dict()
    assert body["abstention_reason"] == "no_candidates"


def test_nonsense_query_abstains_on_evidence_floor(populated: Memory) -> None:
    response = populated.recall("zxqv blorf quuxington vrrp")
    assert response.abstained is True
    assert response.abstention_reason == "evidence_floor"
    assert response.results == ()


def test_a_minimum_relevance_leaves_out_weaker_results_and_nothing_else(
    populated: Memory,
) -> None:
    """``min_relevance`` lists what a recall without it ranks, in the same order and with the
    same scores, less the results below it; ``k`` counts what is left. When nothing is
    left the response abstains as below the evidence floor."""
    for text in (
        "Alice's sister lives in Porto and visits her every summer",
        "Bob works from home on Fridays",
        "Alice used to live in Berlin before the move",
        "The octopus lab is near the harbour in Lisbon",
    ):
        populated.remember(text)
    question = "Where does Alice live?"
    every = populated.recall(question, k=50)
    scores = {r.id: (r.relevance_score, r.ranking_score) for r in every.results}
    relevances = sorted(scores[i][0] for i in every.ids)
    floor = relevances[len(relevances) // 2]
    kept = [r.id for r in every.results if r.relevance_score >= floor]
    assert 0 < len(kept) < len(every.ids)
    for k in (1, 2, 50):
        chosen = populated.recall(question, k=k, min_relevance=floor)
        assert chosen.ids == kept[:k] and not chosen.abstained
        assert [r.rank_position for r in chosen.results] == list(range(1, len(chosen) + 1))
        assert {r.id: (r.relevance_score, r.ranking_score) for r in chosen.results} == {
            i: scores[i] for i in kept[:k]
        }
    assert populated.recall(question, k=50, min_relevance=0).ids == every.ids
    assert relevances[-1] < 1.0
    nothing = populated.recall(question, min_relevance=(relevances[-1] + 1.0) / 2).to_dict()
    assert nothing["results"] == [] and nothing["abstained"] is True
    assert nothing["abstention_reason"] == "evidence_floor"
    traced = populated.recall(question, min_relevance=floor, trace=True).trace or {}
    assert traced["min_relevance"] == {
        "min_relevance": floor,
        "left_out": len(every.ids) - len(kept),
    }


def test_relevance_carries_information_across_queries(populated: Memory) -> None:
    """An answering memory scores clearly higher than the best hit of an unrelated query."""
    good = populated.recall("Which city did Alice move to?", channels=["semantic"]).results[0]
    off = populated.recall("What is the boiling point of mercury?", k=1)
    assert good.relevance_score > 0.5
    assert off.abstained or off.results[0].relevance_score < good.relevance_score - 0.2


def test_trust_follows_feedback(populated: Memory) -> None:
    top = populated.recall("Where does Alice live?").results[0]
    assert populated.feedback(top.id, useful=False) == pytest.approx(3 / 5)
    assert populated.feedback(top.id, useful=True) == pytest.approx(4 / 6)
    again = populated.recall("Where does Alice live?").results[0]
    assert again.trust_score == pytest.approx(4 / 6)


def test_trace_reports_channels(populated: Memory) -> None:
    body = populated.recall("Where does Alice live?", trace=True).to_dict()
    trace = body["trace"]
    assert trace["channels"]["semantic"]["ran"] is True
    assert trace["channels"]["bm25"]["ran"] is True
    assert trace["fusion"] == {
        "method": "weighted_rrf",
        "k": Settings().rrf_k,
        "weights": trace["fusion"]["weights"],
    }
    top = trace["results"][0]
    assert top["id"] == body["results"][0]["id"]
    assert set(top["channels"]) <= {"semantic", "bm25", "temporal", "hopfield", "spreading"}
    # where the time went, step by step, in order: the read path, then the ranking stages
    steps = trace["timings_ms"]
    assert list(steps)[:4] == ["interpret", "while embedding", "embedding wait", "channels"]
    assert list(steps)[4:] == [stage.__name__ for _, stage in STAGES] + ["results"]
    assert all(ms >= 0 for ms in steps.values())
    assert sum(steps.values()) <= trace["total_ms"]


def test_contract_is_the_same_from_every_memory_instance(
    tmp_path: Path, minilm: MiniLMEmbedder
) -> None:
    path = tmp_path / "m.db"
    with Memory(path, embedder=minilm) as first:
        first.remember("The wifi password is on the fridge")
    with Memory(path, embedder=minilm) as second:
        body = second.recall("wifi password").to_dict()
    assert body["results"][0]["content"] == "The wifi password is on the fridge"
