"""Long memories: embedded as passages, searched in full, kept in step by forget, reindex
and migrate, on both stores; the size limit."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from slm import InvalidInput, Memory, Settings, validate
from slm.channels.base import CHANCE_SPREAD, passage_similarity
from slm.copy.stores import migrate

FILLER_SENTENCE = (
    "The quarterly planning notes list the usual agenda items, owners and follow-ups for "
    "the infrastructure team, none of which changed since the last review. "
)


def long_text(ending: str, sentences: int = 40) -> str:
    return FILLER_SENTENCE * sentences + ending


def test_passage_similarity_by_hand() -> None:
    assert passage_similarity(0.4, []) == 0.4
    # Best of three passages, less the chance maximum of three: 0.04 * sqrt(2 ln 3).
    expected = 0.7 - CHANCE_SPREAD * math.sqrt(2 * math.log(3))
    assert passage_similarity(0.2, [0.7, 0.1]) == pytest.approx(expected)
    # A long text whose passages are all alike scores below a short one that matches as well.
    assert passage_similarity(0.5, [0.5] * 20) < 0.5


def test_the_end_of_a_long_memory_is_found(real_memory: Memory) -> None:
    ending = "Marta's cat Biscuit is allergic to salmon, so she only eats chicken."
    record = real_memory.remember(long_text(ending))
    real_memory.remember_many([{"content": f"Note {i}: {FILLER_SENTENCE}"} for i in range(5)])
    further = real_memory.indexes.vectors.passages(
        real_memory.profile, [record_key(real_memory, record.id)]
    )
    assert len(next(iter(further.values()))) >= 2  # read as several passages
    response = real_memory.recall("What can Biscuit the cat not eat?", k=3, channels=["semantic"])
    assert [r.id for r in response.results][:1] == [record.id]


def record_key(memory: Memory, memory_id: str) -> int:
    (found,) = memory.store.get(memory.profile, [memory_id])
    return found.key


def test_forget_removes_passages_and_statements(memory: Memory) -> None:
    text = "I prefer tea to coffee. " + " ".join(f"word{i}" for i in range(600))
    record = memory.remember(text)
    key = record_key(memory, record.id)
    assert memory.indexes.vectors.passages(memory.profile, [key])
    assert memory.indexes.vectors.passages(memory.profile, [key], standing=True)
    vector = memory.embedder.embed_batch(["word590 word591 word592"])[0]
    assert memory.indexes.vectors.passage_search(memory.profile, vector, 10, None)
    memory.forget([record.id])
    assert memory.indexes.vectors.passages(memory.profile, [key]) == {}
    assert memory.indexes.vectors.passages(memory.profile, [key], standing=True) == {}
    assert memory.indexes.vectors.passage_search(memory.profile, vector, 10, None) == []
    assert memory.indexes.vectors.standing_search(memory.profile, vector, 10) == []


def test_reindex_keeps_passages_and_statements(memory: Memory) -> None:
    text = "Always answer in French when I ask about recipes. " + "filler " * 500
    record = memory.remember(text)
    key = record_key(memory, record.id)
    before = memory.indexes.vectors.passages(memory.profile, [key])[key]
    statements = memory.indexes.vectors.standing_search(memory.profile, before[0], 5)
    assert memory.reindex() == 1
    after = memory.indexes.vectors.passages(memory.profile, [key])[key]
    assert after.shape == before.shape
    assert memory.indexes.vectors.standing_search(memory.profile, before[0], 5) == statements
    response = memory.recall("French recipes", k=3)
    assert record.id in [r.id for r in response.results]


def test_migrate_copies_passages_and_statements(tmp_path: Path, store_at: dict[str, Any]) -> None:
    source = tmp_path / "source.db"
    text = "I'd rather walk than drive. " + " ".join(f"token{i}" for i in range(700))
    with Memory(source, settings=Settings(embedder="fake")) as memory:
        key = record_key(memory, memory.remember(text).id)
        passages = memory.indexes.vectors.passages(memory.profile, [key])[key]
        standing = memory.indexes.vectors.passages(memory.profile, [key], standing=True)[key]
    target = store_at.get("dsn") or store_at["path"]
    migrate(source, target, settings=Settings(embedder="fake"))
    with Memory(**store_at, settings=Settings(embedder="fake")) as copy:
        (record,) = copy.list()
        copied = record_key(copy, record.id)
        assert copy.indexes.vectors.passages(copy.profile, [copied])[copied] == pytest.approx(
            passages
        )
        statements = copy.indexes.vectors.passages(copy.profile, [copied], standing=True)[copied]
        assert statements == pytest.approx(standing)


def test_content_size_limit(memory: Memory) -> None:
    assert memory.remember("x").content == "x"
    largest = "word " * (validate.MAX_CONTENT_BYTES // 5)
    stored = memory.remember(largest)
    assert len(stored.content.encode()) <= validate.MAX_CONTENT_BYTES
    with pytest.raises(InvalidInput, match=f"limit is {validate.MAX_CONTENT_BYTES} bytes"):
        memory.remember("y" * (validate.MAX_CONTENT_BYTES + 1))
    assert memory.count() == 2
