"""The library API: remember, batches, idempotency, get, list, forget, profiles, health."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import slm
from slm import ConfigError, Memory, MemoryInput, NotFound, Settings
from slm.embed.fake import FakeEmbedder


def test_public_surface_is_sorted_and_importable() -> None:
    assert slm.__all__ == sorted(slm.__all__, key=lambda n: (not n.isupper(), n))
    for name in slm.__all__:
        assert hasattr(slm, name)


def test_remember_returns_the_stored_memory(memory: Memory) -> None:
    record = memory.remember(
        "  Deploys happen on Thursdays  ",
        event_time="2024-01-02T03:04:05+02:00",
        source="ops-bot",
        confidence=0.5,
        metadata={"team": "infra"},
        tags=["ops", "ops"],
    )
    assert len(record.id) == 16
    assert record.content == "Deploys happen on Thursdays"
    assert record.event_time.isoformat() == "2024-01-02T01:04:05+00:00"
    assert (record.source, record.confidence, dict(record.metadata), record.tags) == (
        "ops-bot",
        0.5,
        {"team": "infra"},
        ("ops",),
    )
    assert memory.get(record.id) == record


def test_identical_content_is_idempotent(memory: Memory) -> None:
    first = memory.remember("The cat is called Pixel")
    second = memory.remember("The cat is called Pixel", source="someone-else")
    assert first.id == second.id
    assert memory.count() == 1


def test_remember_many_dedupes_within_and_across_batches(memory: Memory) -> None:
    memory.remember("one")
    records = memory.remember_many(
        [{"content": "one"}, MemoryInput("two"), {"content": "two"}, {"content": "three"}]
    )
    assert [r.content for r in records] == ["one", "two", "two", "three"]
    assert records[1].id == records[2].id
    assert memory.count() == 3


class CountingEmbedder(FakeEmbedder):
    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed_batch(self, texts: Any) -> Any:
        self.texts.extend(texts)
        return super().embed_batch(texts)


def test_embeddings_are_batched_and_never_recomputed(store_at: dict[str, Any]) -> None:
    embedder = CountingEmbedder()
    with Memory(**store_at, embedder=embedder) as memory:
        memory.remember_many([{"content": f"memory number {i}"} for i in range(50)])
        memory.remember_many([{"content": "memory number 3"}])
    assert len(embedder.texts) == 50
    reopened = CountingEmbedder()
    with Memory(**store_at, embedder=reopened) as memory:
        assert memory.recall("memory number 7").results[0].memory.content == "memory number 7"
    assert reopened.texts == ["memory number 7"]  # only the query was embedded


def test_store_refuses_another_embedder(store_at: dict[str, Any]) -> None:
    with Memory(**store_at, embedder=FakeEmbedder()) as memory:
        memory.remember("x marks the spot")

    class Other(FakeEmbedder):
        name = "other-space"

    with pytest.raises(ConfigError, match="fake-hash-384"):
        Memory(**store_at, embedder=Other())


def test_get_unknown_id_raises_not_found(memory: Memory) -> None:
    with pytest.raises(NotFound, match="0123456789abcdef"):
        memory.get("0123456789abcdef")


def test_list_orders_newest_first_and_pages(memory: Memory) -> None:
    for i in range(5):
        memory.remember(f"note {i}", tags=["even"] if i % 2 == 0 else [])
    contents = [r.content for r in memory.list(limit=10)]
    assert contents == [f"note {i}" for i in reversed(range(5))]
    assert [r.content for r in memory.list(limit=2, offset=1)] == ["note 3", "note 2"]
    assert [r.content for r in memory.list(tags=["even"])] == ["note 4", "note 2", "note 0"]


def test_forget_removes_from_every_index(memory: Memory) -> None:
    keep = memory.remember("apples are red and crunchy")
    gone = memory.remember("bananas are yellow and soft")
    assert gone.id in memory.recall("yellow bananas").ids
    assert memory.forget([gone.id, "0123456789abcdef"], missing_ok=True) == [gone.id]
    assert memory.count() == 1
    with pytest.raises(NotFound):
        memory.get(gone.id)
    assert gone.id not in memory.recall("yellow bananas soft").ids
    store = memory.store
    assert "banana" not in store.postings(memory.profile, ["banana"], 100)
    assert store.lexical_stats(memory.profile, ["banana"]).df == {}
    assert store.lexical_stats(memory.profile, []).n_docs == 1
    assert not memory.indexes.vectors.get(memory.profile, [gone.key]).any()
    assert (
        memory.indexes.vectors.search(memory.profile, np.ones(384, np.float32), 10, None)[0][0]
        == keep.key
    )
    # forgetting then remembering the same text stores it again
    assert memory.remember("bananas are yellow and soft").id != gone.id


def test_profiles_are_isolated(store_at: dict[str, Any]) -> None:
    settings = Settings(embedder="fake")
    with (
        Memory(**store_at, profile="alice", settings=settings) as alice,
        Memory(**store_at, profile="bob", settings=settings) as bob,
    ):
        secret = alice.remember("alice's secret is the blue door")
        bob.remember("bob likes trains")
        assert (
            bob.recall("secret blue door").ids == []
            or secret.id not in bob.recall("secret blue door").ids
        )
        assert [r.content for r in bob.list()] == ["bob likes trains"]
        assert bob.count() == 1
        with pytest.raises(NotFound):
            bob.forget([secret.id])
        assert bob.forget([secret.id], missing_ok=True) == []
        with pytest.raises(NotFound):
            bob.get(secret.id)
        assert alice.get(secret.id).content == secret.content
        # the same text in two profiles is two memories
        assert bob.remember("alice's secret is the blue door").id != secret.id


def test_writes_from_another_connection_are_seen(store_at: dict[str, Any]) -> None:
    settings = Settings(embedder="fake")
    with (
        Memory(**store_at, settings=settings) as reader,
        Memory(**store_at, settings=settings) as writer,
    ):
        reader.remember("first memory about kayaks")
        assert reader.recall("kayaks").results
        added = writer.remember("second memory about canoes")
        assert added.id in reader.recall("canoes").ids
        writer.forget([added.id])
        assert added.id not in reader.recall("canoes").ids


def test_recall_filters(memory: Memory) -> None:
    memory.remember("met Jo for coffee", source="a", event_time="2024-01-05", tags=["social"])
    memory.remember("met Jo for lunch", source="b", event_time="2024-03-05")
    assert [r.memory.source for r in memory.recall("met Jo", source="b").results] == ["b"]
    assert len(memory.recall("met Jo", tags=["social"]).results) == 1
    after = memory.recall("met Jo", after="2024-02-01").results
    assert [r.memory.content for r in after] == ["met Jo for lunch"]
    before = memory.recall("met Jo", before="2024-02-01").results
    assert [r.memory.content for r in before] == ["met Jo for coffee"]


def test_health_reports_every_channel(memory: Memory) -> None:
    report = memory.health()
    assert report["store"]["healthy"] is True
    if report["store"]["kind"] == "sqlite":
        assert report["store"]["journal_mode"] == "wal"
    else:
        assert report["store"]["pgvector"] >= "0.8"
    assert report["embedder"]["healthy"] is True
    assert set(report["channels"]) == set(slm.ALL_CHANNELS)
    for state in report["channels"].values():
        assert set(state) >= {"healthy", "reason"}


def test_channels_can_be_restricted_per_call(memory: Memory) -> None:
    memory.remember("a note about gardening")
    trace = memory.recall("gardening", channels=["bm25"], trace=True).trace
    assert trace is not None
    assert trace["channels"]["bm25"]["ran"] is True
    assert trace["channels"]["semantic"]["ran"] is False
    assert trace["channels"]["semantic"]["reason"] == "disabled"


def test_mean_vector_follows_writes_and_forgets(memory: Memory) -> None:
    records = memory.remember_many([{"content": f"note about topic {i}"} for i in range(5)])
    mean, count = memory.indexes.vectors.mean(memory.profile)
    vectors = memory.indexes.vectors.get(memory.profile, [r.key for r in records])
    assert count == 5
    assert np.allclose(mean, vectors.mean(axis=0), atol=1e-5)
    memory.forget([records[0].id, records[1].id])
    mean, count = memory.indexes.vectors.mean(memory.profile)
    assert count == 3
    assert np.allclose(mean, vectors[2:].mean(axis=0), atol=1e-5)


def test_a_recall_request_is_one_value_logged_and_replayed(tmp_path: Path) -> None:
    """Memory.recall and recall_request answer alike; the log keeps the request whole
    (every option but trace) and it reads back as the same request."""
    from slm import RecallRequest
    from slm.models import LOGGED_OPTIONS

    with Memory(tmp_path / "m.db", settings=Settings(embedder="fake")) as memory:
        memory.remember_many(
            [
                {"content": "Priya is allergic to cats", "tags": ["health"]},
                {"content": "Deploys happen on Thursdays", "tags": ["work"]},
            ]
        )
        request = RecallRequest(
            "Priya cats", k=3, tags=(t for t in ["health"]), now="2025-01-01T00:00:00Z"
        )
        assert request.tags == ("health",)  # a generator is read once, when built
        by_keywords = memory.recall("Priya cats", k=3, tags=["health"], now="2025-01-01T00:00:00Z")
        by_value = memory.recall_request(request)
        assert by_value.ids == by_keywords.ids and by_value.ids
        memory.learning.flush()
        entry = memory.learning.logged_recall(by_value.query_id or "")
        kept = json.loads(entry.request)
        given_only = {"metadata", "min_relevance", "user_id", "agent_id", "run_id", "scope"}
        assert set(kept) == set(LOGGED_OPTIONS) - given_only
        assert RecallRequest.from_log(kept) == RecallRequest(
            "Priya cats", k=3, tags=["health"], now="2025-01-01T00:00:00Z"
        )
        with pytest.raises(TypeError):
            RecallRequest.from_log({**kept, "colour": "blue"})
        # a minimum is kept when given; a log written before the option existed still loads
        floored = memory.recall_request(replace(request, min_relevance=0.25))
        memory.learning.flush()
        logged = json.loads(memory.learning.logged_recall(floored.query_id or "").request)
        assert logged["min_relevance"] == 0.25
        assert RecallRequest.from_log(logged).min_relevance == 0.25
        older = {key: value for key, value in logged.items() if key != "min_relevance"}
        assert RecallRequest.from_log(older).min_relevance is None
        with pytest.raises(TypeError):
            memory.recall_with(None, request, k=5)
