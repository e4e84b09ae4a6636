"""Fusion, relevance and BM25 math, against hand-computed numbers and a brute-force reference."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from slm import Memory
from slm.channels.base import Hit
from slm.channels.bm25 import MIN_SHARE_OF_BEST
from slm.channels.postings import idf
from slm.ingest.text import query_terms, terms
from slm.recall.fusion import (
    entity_graph_boost,
    lexical_coverage,
    order,
    relevance,
    semantic_strength,
    source_trust,
    weighted_rrf,
)


def test_weighted_rrf_by_hand() -> None:
    rankings = {
        "semantic": [Hit(1, 1, 0.9), Hit(2, 2, 0.8)],
        "bm25": [Hit(2, 1, 7.0), Hit(3, 2, 3.0)],
    }
    fused = weighted_rrf(rankings, {"semantic": 1.0, "bm25": 0.5}, k=60)
    assert fused[1] == pytest.approx(1 / 61)
    assert fused[2] == pytest.approx(1 / 62 + 0.5 / 61)
    assert fused[3] == pytest.approx(0.5 / 62)
    assert order(fused) == [2, 1, 3]


def test_order_breaks_ties_toward_the_later_memory() -> None:
    assert order({5: 1.0, 3: 1.0, 9: 2.0}) == [9, 5, 3]


def test_semantic_strength_and_relevance_by_hand() -> None:
    assert semantic_strength(0.15, 0.15, 0.75) == 0.0
    assert semantic_strength(0.45, 0.15, 0.75) == pytest.approx(0.5)
    assert semantic_strength(0.95, 0.15, 0.75) == 1.0
    assert relevance(0.0, 0.0) == 0.0
    assert relevance(0.5, 0.0) == pytest.approx(0.5)
    assert relevance(0.5, 1.0) == pytest.approx(1 - 0.5 * 0.4)
    assert relevance(1.0, 0.3) == 1.0


def test_lexical_coverage_by_hand() -> None:
    weights = {"lisbon": 2.0, "move": 1.0, "alic": 1.0}
    assert lexical_coverage(["lisbon", "move", "alic"], {"lisbon", "alic"}, weights) == 0.75
    assert lexical_coverage([], {"x"}, weights) == 0.0


def test_source_trust_is_the_beta_posterior_mean() -> None:
    assert source_trust(0, 0, (3.0, 1.0)) == 0.75
    assert source_trust(2, 3, (3.0, 1.0)) == pytest.approx(5 / 9)


def test_terms_drop_stopwords_and_stem() -> None:
    assert terms("The paintings were painted by Melanie's sister") == [
        "paint",
        "paint",
        "melani",
        "sister",
    ]
    assert query_terms("paint painting paints") == ["paint"]


CORPUS = [
    "Caroline went to the LGBTQ support group yesterday",
    "Melanie painted a sunrise over the lake last year",
    "The support group meets every Tuesday at the community centre",
    "Melanie and Caroline talked about painting and pottery classes",
    "A lake house rental for the summer with the kids",
    "Caroline is researching adoption agencies for her future family",
]


def reference_bm25(query: str, docs: list[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Okapi BM25 written out directly from the formula, one document at a time."""
    tokenised = [terms(d) for d in docs]
    avgdl = sum(len(t) for t in tokenised) / len(tokenised)
    n = len(docs)
    scores = []
    for doc in tokenised:
        tf = Counter(doc)
        total = 0.0
        for term in query_terms(query):
            df = sum(1 for d in tokenised if term in d)
            if df == 0 or term not in tf:
                continue
            term_idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            total += (
                term_idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(doc) / avgdl))
            )
        scores.append(total)
    return scores


@pytest.mark.parametrize(
    "query", ["support group", "Melanie painting lake", "Caroline adoption", "kids summer lake"]
)
def test_bm25_channel_matches_reference(memory: Memory, query: str) -> None:
    records = memory.remember_many([{"content": c} for c in CORPUS])
    expected = reference_bm25(query, CORPUS)
    trace = memory.recall(query, channels=["bm25"], trace=True, k=10).trace
    assert trace is not None
    got = {c["id"]: c["score"] for c in trace["channels"]["bm25"]["candidates"]}
    floor = MIN_SHARE_OF_BEST * max(expected)
    for record, score in zip(records, expected, strict=True):
        if score > 0 and score >= floor:
            assert got[record.id] == pytest.approx(score, rel=1e-5)
        else:
            assert record.id not in got


def test_bm25_drops_hits_that_match_only_what_is_everywhere(memory: Memory) -> None:
    """In a chat every turn names someone; a turn sharing only that name with the question is
    not a lexical match worth a rank."""
    chat = [
        "Melanie: I signed up for a pottery class yesterday, pottery is so calming",
        "Caroline: Thanks, Melanie!",
        "Caroline: Hey Melanie, how are you?",
        "Melanie: Yeah, Caroline! See you soon.",
        "Caroline: I went to a support group, Melanie.",
    ]
    records = memory.remember_many([{"content": c} for c in chat])
    query = "Which pottery class did Melanie take?"
    expected = reference_bm25(query, chat)
    assert sum(1 for s in expected if s > 0) == len(chat)  # every turn matches "melanie"
    trace = memory.recall(query, channels=["bm25"], trace=True, k=10).trace
    assert trace is not None
    got = [c["id"] for c in trace["channels"]["bm25"]["candidates"]]
    assert got == [records[0].id]


def test_idf_is_positive_even_for_ubiquitous_terms() -> None:
    assert idf(10, 10) > 0
    assert idf(10, 1) > idf(10, 5)


def test_entity_graph_boost_by_hand() -> None:
    boosts = entity_graph_boost(
        query_entities=[frozenset({1}), frozenset({2, 3})],
        candidate_entities={10: frozenset({1, 3}), 11: frozenset({1}), 12: frozenset()},
        adjacency={12: {10: "prev"}},
        leaders={10: 1.0},
        entity_weight=0.005,
        graph_weight=0.01,
        speakers={10: frozenset({1}), 11: frozenset({1})},
        speaker_weight=0.05,
        relevance={10: 0.8, 11: 0.1, 12: 0.9},
    )
    # 10 mentions both query entities and speaks as one of them
    assert boosts[10] == pytest.approx(0.005 * 2 / 2 + 0.05 * 0.8 * 1 / 2)
    # 11 speaks as entity 1 too, but carries little evidence of its own
    assert boosts[11] == pytest.approx(0.005 * 1 / 2 + 0.05 * 0.1 * 1 / 2)
    # 12 only follows the leader
    assert boosts[12] == pytest.approx(0.01 * 1.0)
