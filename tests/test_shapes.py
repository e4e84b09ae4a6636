"""Odd shapes of input and store: a clear error or a normal answer, never a crash."""

from __future__ import annotations

import base64
import random

import pytest

from slm import InvalidInput, Memory, validate


def test_binary_looking_text_is_stored_and_searched(memory: Memory) -> None:
    rng = random.Random(7)
    blob = base64.b64encode(rng.randbytes(30_000)).decode()
    latin = rng.randbytes(2_000).decode("latin-1").replace("\x00", " ")
    stored = [memory.remember(text) for text in (blob, latin, "\x01\x02\x7f tab\tline\nend")]
    assert memory.count() == 3
    for record in stored:
        assert memory.get(record.id).content == record.content
    response = memory.recall(blob[:60])
    assert response.results and response.results[0].id == stored[0].id


def test_a_question_past_the_limit_is_refused_with_its_size(memory: Memory) -> None:
    memory.remember("The garage code is 4411.")
    question = "What is the garage code? " * 200  # 5,000 characters
    with pytest.raises(InvalidInput, match=f"the limit is {validate.MAX_QUERY_BYTES} bytes"):
        memory.recall(question)
    longest = ("What is the garage code? " * 200)[: validate.MAX_QUERY_BYTES]
    assert memory.recall(longest).results


@pytest.mark.parametrize("source", ["assistant", "user", None])
def test_a_store_of_one_source_answers_normally(real_memory: Memory, source: str | None) -> None:
    texts = [
        "Always include version numbers when I ask about libraries.",
        "The project uses Flask 2.3.1 and SQLite 3.39.",
        "I prefer minimal dependencies.",
        "Deploys go to Render on Fridays.",
    ]
    records = real_memory.remember_many([{"content": t, "source": source} for t in texts])
    response = real_memory.recall("Which libraries does the project use?", k=4)
    assert not response.abstained
    assert records[1].id in [r.id for r in response.results]
    statements = real_memory.indexes.vectors.standing_search(
        real_memory.profile, real_memory.embedder.embed_batch(["libraries"])[0], 10
    )
    # An assistant's "always" is advice, not the user's standing instruction.
    assert (statements == []) == (source == "assistant")
