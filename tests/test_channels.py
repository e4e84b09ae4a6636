"""The five channels: each finds, on a hand-made fixture, a memory the others miss."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from slm import Memory, Settings
from slm.channels import ALL_CHANNELS
from slm.channels.base import Context, Health, Hit, Need, Role
from slm.embed import Matrix
from slm.embed.fake import FakeEmbedder


def channel_ranks(trace: dict[str, Any], memory_id: str) -> dict[str, int]:
    return {
        name: hit["rank"]
        for name, run in trace["channels"].items()
        for hit in run["candidates"]
        if hit["id"] == memory_id
    }


def test_temporal_finds_a_memory_by_its_month(memory: Memory) -> None:
    target = memory.remember("Moved the sailing boat to the new marina", event_time="2024-07-12")
    for month in ("2024-03-02", "2024-05-20", "2024-09-14", "2024-11-30"):
        memory.remember(f"Routine dentist visit and grocery run on {month}", event_time=month)
    response = memory.recall("What happened in July 2024?", trace=True)
    trace = response.trace
    assert trace is not None
    assert trace["query"]["time_window"]["start"].startswith("2024-07-01")
    ranks = channel_ranks(trace, target.id)
    assert ranks["temporal"] == 1
    assert "bm25" not in ranks
    assert ranks.get("semantic", 99) > 1
    assert response.results[0].id == target.id
    assert trace["results"][0]["time_window_match"] is True


def test_temporal_resolves_dates_in_the_text(memory: Memory) -> None:
    said = memory.remember(
        "Caroline: I went to the support group yesterday", event_time="2023-05-08T13:56:00Z"
    )
    memory.remember("Caroline: painting again this weekend", event_time="2023-06-20T10:00:00Z")
    trace = memory.recall("What did Caroline do on 7 May 2023?", trace=True).trace
    assert trace is not None
    assert channel_ranks(trace, said.id)["temporal"] == 1


def test_when_questions_favour_dated_memories(memory: Memory) -> None:
    dated = memory.remember("We adopted the puppy last Saturday", event_time="2024-02-12")
    memory.remember("We love the puppy so much", event_time="2024-02-13")
    trace = memory.recall("When did we adopt the puppy?", trace=True).trace
    assert trace is not None
    assert trace["query"]["when_question"] is True
    assert [h["id"] for h in trace["channels"]["temporal"]["candidates"]] == [dated.id]


def test_relative_query_window_uses_now(memory: Memory) -> None:
    recent = memory.remember("Fixed the garden fence", event_time="2024-06-04")
    memory.remember("Fixed the bike chain", event_time="2024-04-01")
    response = memory.recall("What did I fix last week?", now="2024-06-10T12:00:00Z", trace=True)
    assert response.trace is not None
    assert response.trace["query"]["time_window"]["start"].startswith("2024-06-03")
    assert channel_ranks(response.trace, recent.id)["temporal"] == 1


def test_spreading_finds_the_answer_in_the_next_turn(memory: Memory) -> None:
    session = {"conversation": "c1", "session": 3}
    question = memory.remember(
        "Maya: Did you ever hear back from the vet about Pixel?", source="maya", metadata=session
    )
    answer = memory.remember(
        "Sam: Yes, mild allergy; salmon kibble only from now on.", source="sam", metadata=session
    )
    for i, text in enumerate(["Bought new running shoes", "Booked train tickets to Porto"]):
        memory.remember(text, metadata={"conversation": "c1", "session": 10 + i})
    query = "What did the vet say about Pixel?"
    with_spreading = memory.recall(query, trace=True)
    assert with_spreading.trace is not None
    assert answer.id in with_spreading.ids
    ranks = channel_ranks(with_spreading.trace, answer.id)
    assert "spreading" in ranks and "bm25" not in ranks
    detail = {r["id"]: r for r in with_spreading.trace["results"]}
    assert detail[answer.id]["evidence"] == "supported"
    assert detail[question.id]["evidence"] == "primary"
    without = memory.recall(query, channels=["semantic", "bm25", "temporal", "hopfield"])
    assert answer.id not in without.ids


class VectorTable(FakeEmbedder):
    """Hand-placed unit vectors for named texts (the Hopfield test is about the dynamics)."""

    name = "vector-table"

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def embed_batch(self, texts: Sequence[str]) -> Matrix:
        rows = [self.table[t] / np.linalg.norm(self.table[t]) for t in texts]
        return np.array(rows, dtype=np.float32)


def test_hopfield_completes_a_noisy_cue_to_the_stored_pattern(tmp_path: Path) -> None:
    basis = np.eye(384, dtype=np.float32)
    table = {
        "target": basis[0],
        "associate": 0.75 * basis[0] + 0.66 * basis[1],
        **{f"distractor {i}": basis[2 + i] for i in range(5)},
        "noisy cue": 0.6 * basis[0] + 0.5 * basis[2:7].sum(axis=0),
    }
    with Memory(tmp_path / "h.db", embedder=VectorTable(table)) as memory:
        stored = {
            r.content: r.id
            for r in memory.remember_many([{"content": t} for t in table if t != "noisy cue"])
        }
        trace = memory.recall("noisy cue", trace=True, k=10).trace
    assert trace is not None
    hopfield = [h["id"] for h in trace["channels"]["hopfield"]["candidates"]]
    semantic = [h["id"] for h in trace["channels"]["semantic"]["candidates"]]
    assert hopfield[:2] == [stored["target"], stored["associate"]]
    assert semantic.index(stored["associate"]) == 6  # below all five distractors


def test_every_channel_runs_and_is_traced(real_memory: Memory) -> None:
    real_memory.remember_many(
        [
            {
                "content": "Caroline: I went to the LGBTQ support group yesterday",
                "event_time": "2023-05-08T13:56:00Z",
                "metadata": {"session": 1},
            },
            {
                "content": "Melanie: That's wonderful, Caroline! How did it feel?",
                "event_time": "2023-05-08T13:57:00Z",
                "metadata": {"session": 1},
            },
        ]
    )
    body = real_memory.recall(
        "When did Caroline go to the support group in May 2023?", trace=True
    ).to_dict()
    trace = body["trace"]
    assert set(trace["channels"]) == set(ALL_CHANNELS)
    for run in trace["channels"].values():
        assert run["ran"] is True and run["error"] is None and run["ms"] >= 0
        for hit in run["candidates"]:
            assert set(hit) == {"id", "rank", "score"}
    assert trace["fusion"]["k"] == Settings().rrf_k
    assert set(trace["fusion"]["weights"]) == set(trace["channels"])
    assert trace["query"]["entities"] == {"caroline": trace["query"]["entities"]["caroline"]}
    assert trace["query"]["entities"]["caroline"]  # resolved to a stored entity
    assert trace["query"]["time_window"]["granularity"] == "month"
    top = trace["results"][0]
    assert top["id"] == body["results"][0]["id"]
    assert {"semantic", "bm25"} <= set(top["channels"])
    assert top["entity_graph_boost"] > 0


def test_enhancement_never_adds_candidates(real_memory: Memory) -> None:
    real_memory.remember_many(
        [
            {
                "content": f"Jordan mentioned the Lisbon trip, note {i}",
                "metadata": {"session": i // 3},
            }
            for i in range(12)
        ]
        + [{"content": "Jordan's sister lives in Lisbon"}, {"content": "Unrelated grocery list"}]
    )
    for query in ["What about Jordan and Lisbon?", "Who lives in Lisbon?", "grocery"]:
        trace = real_memory.recall(query, trace=True, k=50).trace
        assert trace is not None
        found = {h["id"] for run in trace["channels"].values() for h in run["candidates"]}
        for result in trace["results"]:
            assert result["id"] in found


def test_channel_switches_in_settings(tmp_path: Path) -> None:
    settings = Settings(embedder="fake", channels=("semantic", "bm25"))
    with Memory(tmp_path / "s.db", settings=settings) as memory:
        memory.remember("a note on kayaks")
        trace = memory.recall("kayaks", trace=True).trace
        assert trace is not None
        assert {n for n, r in trace["channels"].items() if r["ran"]} == {"semantic", "bm25"}
        assert trace["channels"]["hopfield"]["reason"] == "disabled"
        assert memory.health()["channels"]["hopfield"]["enabled"] is False


@pytest.mark.parametrize("weights", [{"bm25": 0.0}, {"semantic": 2.0, "bm25": 0.5}])
def test_weights_change_fusion(tmp_path: Path, weights: dict[str, float]) -> None:
    settings = Settings(embedder="fake", weights={**Settings().weights, **weights}, rrf_k=10)
    with Memory(tmp_path / "w.db", settings=settings) as memory:
        memory.remember("kayak trip")
        trace = memory.recall("kayak", trace=True).trace
        assert trace is not None
        assert trace["fusion"]["k"] == 10
        for name, weight in weights.items():
            assert trace["fusion"]["weights"][name] == weight


def test_temporal_proximity_by_hand() -> None:
    from slm.channels.temporal import DAY_US, proximity

    start, end = 10 * DAY_US, 12 * DAY_US  # a two-day window
    starts = np.array([11 * DAY_US, 12 * DAY_US, 6 * DAY_US, 16 * DAY_US, 9 * DAY_US])
    ends = np.array([11 * DAY_US, 13 * DAY_US, 8 * DAY_US, 17 * DAY_US, 11 * DAY_US])
    # Inside; starting right at the window's end (distance 0); ending two days (one window
    # length) before it; starting four days after it; overlapping its start.
    expected = [1.0, 1.0, 1 / (1 + 2 / 2), 1 / (1 + 4 / 2), 1.0]
    assert proximity(starts, ends, start, end).tolist() == pytest.approx(expected)


def test_ranked_arrays_orders_like_ranked() -> None:
    from slm.channels.base import ranked, ranked_arrays

    rng = np.random.default_rng(3)
    keys = rng.permutation(200).astype(np.int64)
    scores = rng.integers(0, 20, size=200).astype(np.float64) / 7  # many ties
    pairs = list(zip(keys.tolist(), scores.tolist(), strict=True))
    for k in (0, 1, 10, 37, 200, 250):
        assert ranked_arrays(keys, scores, k) == ranked(pairs, k)


def test_spreading_frontier_keeps_the_most_activated_in_order() -> None:
    from slm.channels.spreading import _top

    rng = np.random.default_rng(5)
    ids = rng.permutation(500).tolist()
    activation = {i: float(rng.integers(0, 30)) / 11 for i in ids}  # many ties
    expected = sorted(activation.items(), key=lambda p: (-p[1], p[0]))[:64]
    assert list(_top(activation, 64).items()) == expected
    small = dict(list(activation.items())[:10])
    assert _top(small, 64) is small


def test_only_bm25_runs_before_the_vector() -> None:
    from slm.channels import REGISTRY

    assert {channel.name for channel in REGISTRY if not channel.needs} == {"bm25"}


def test_early_channels_give_the_same_recall(
    real_memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BM25 runs while the question embeds; run in its turn instead, every score is the same."""
    real_memory.remember_many(
        [
            {"content": f"Dana fixed the {thing} on {day}", "event_time": f"2024-03-{day:02d}"}
            for day, thing in enumerate(["bike", "roof", "boiler", "fence", "gate"], start=3)
        ]
    )
    questions = ["What did Dana fix on the roof?", "boiler in March 2024", "Who is Dana?"]

    def answers() -> list[Any]:
        out = []
        for question in questions:
            response = real_memory.recall(question, trace=True, now="2024-04-01")
            assert response.trace is not None
            assert response.trace["channels"]["bm25"]["ran"] is True
            out.append(
                [(r.id, r.ranking_score, r.relevance_score, r.channels) for r in response.results]
            )
        return out

    early = answers()
    monkeypatch.setattr(real_memory.channels["bm25"], "needs", frozenset({"prior"}))
    assert answers() == early
    assert any(early)


def test_a_channel_reading_the_pending_vector_fails_loudly(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slm.recall.interpret import PENDING

    memory.remember("a note on kayaks")
    monkeypatch.setattr(memory.channels["semantic"], "needs", frozenset())
    trace = memory.recall("kayaks", trace=True).trace
    assert trace is not None
    assert PENDING.shape == (0,)
    assert trace["channels"]["semantic"]["ran"] is False
    assert trace["channels"]["semantic"]["error"]


class ShortestChannel:
    """A toy channel: the shortest memories first."""

    name: ClassVar[str] = "shortest"
    weight: ClassVar[float] = 0.3
    needs: ClassVar[frozenset[Need]] = frozenset()
    role: ClassVar[Role] = "plain"
    index: ClassVar[str | None] = None

    def __init__(self, settings: Settings) -> None:
        pass

    def health(self) -> Health:
        return Health(True)

    def candidates(self, context: Context, k: int) -> list[Hit]:
        records = context.store.page(context.query.profile, 100, 0, context.query.filters)
        shortest = sorted(records, key=lambda r: (len(r.content), r.key))[:k]
        return [Hit(r.key, rank, 1.0 / len(r.content)) for rank, r in enumerate(shortest, 1)]


def test_a_new_channel_is_one_class_and_one_registry_line(
    memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What docs/architecture.md promises: a toy channel that finds memories by length joins
    every recall, its trace, health and fusion, with its own default weight."""
    import slm.channels as channels

    monkeypatch.setattr(channels, "REGISTRY", (*channels.REGISTRY, ShortestChannel))
    with Memory(tmp_path / "toy.db", settings=Settings(embedder="fake")) as toy:
        toy.remember_many([{"content": "kayak"}, {"content": "a long note about kayaks"}])
        response = toy.recall("kayak", trace=True)
        assert response.trace is not None
        assert response.trace["channels"]["shortest"]["ran"] is True
        assert response.trace["fusion"]["weights"]["shortest"] == 0.3
        assert "shortest" in response.results[0].channels
        assert toy.health()["channels"]["shortest"]["healthy"] is True
        only = toy.recall("kayak", channels=["shortest", "bm25"], trace=True).trace
        assert only is not None and only["channels"]["semantic"]["reason"] == "disabled"


def test_a_new_channel_leaves_the_shipped_ranker_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reranking on (the default): the shipped model, trained before the channel existed,
    still loads and reranks, reading its own features by name; a model retrained with the
    channel reads the channel's column too."""
    import numpy as np

    import slm.channels as channels
    from slm.learn.features import FEATURES, feature_names
    from slm.learn.model import Example, Ranker, default_ranker, fit

    class LongestChannel(ShortestChannel):
        name: ClassVar[str] = "longest"
        weight: ClassVar[float] = 0.2

    monkeypatch.setattr(channels, "REGISTRY", (*channels.REGISTRY, LongestChannel))
    names = feature_names()
    assert "rr_longest" in names and "rr_longest" not in FEATURES
    shipped = default_ranker()
    assert shipped.features == FEATURES
    settings = Settings(embedder="fake", rerank=True)
    with Memory(tmp_path / "toy.db", settings=settings) as toy:
        toy.remember_many(
            [{"content": f"kayak trip {i} on the lake, " + "paddling " * i} for i in range(8)]
        )
        trace = toy.recall("kayak trip on the lake", trace=True).trace
        assert trace is not None and trace["channels"]["longest"]["ran"] is True
        assert trace["rerank"]["model"] == shipped.id
        assert trace["rerank"]["shift"] is not None
    # A model trained with the channel: it names rr_longest, and that column moves it.
    rng = np.random.default_rng(0)
    examples = []
    for _ in range(40):
        matrix = rng.random((10, len(names)))
        best = int(np.argmax(matrix[:, names.index("rr_longest")]))
        examples.append(Example(matrix, tuple(1 if i == best else 0 for i in range(10))))
    model = fit(examples, trained_on="test")
    assert model.features == names
    again = Ranker.from_json(model.to_json())
    assert again.features == names and again.id == model.id
    probe = np.zeros((2, len(names)))
    probe[1, names.index("rr_longest")] = 1.0
    scores = model.score(probe)
    assert scores[1] > scores[0]
