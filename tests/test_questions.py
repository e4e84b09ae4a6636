"""Recalls at once: their questions share model runs, each getting its own row, and they
answer as they do one by one."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from slm import Memory, Settings
from slm.embed.base import Matrix
from slm.embed.fake import FakeEmbedder
from slm.embed.questions import Questions
from slm.errors import EmbedderError


class Held(FakeEmbedder):
    """The fake embedder, recording each run; the first run waits until released."""

    def __init__(self) -> None:
        self.runs: list[list[str]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = False

    def embed_batch(self, texts: Sequence[str]) -> Matrix:
        self.runs.append(list(texts))
        if len(self.runs) == 1:
            self.entered.set()
            assert self.release.wait(10)
        if self.fail:
            raise RuntimeError("the model broke")
        return super().embed_batch(texts)


def test_questions_that_wait_go_into_one_run_and_each_gets_its_own_row() -> None:
    model = Held()
    questions = Questions(model)
    first = questions.submit("where does Ana live?")
    assert model.entered.wait(10)
    texts = [f"question number {i} about the garden" for i in range(5)]
    waiting = [questions.submit(text) for text in texts]
    model.release.set()
    alone = FakeEmbedder()
    assert np.array_equal(first.result(10), alone.embed_batch(["where does Ana live?"]))
    for text, done in zip(texts, waiting, strict=True):
        row = done.result(10)
        assert row.shape == (1, 384)
        assert np.array_equal(row, alone.embed_batch([text]))
    assert model.runs == [["where does Ana live?"], texts]
    questions.close()


def test_a_model_error_reaches_every_question_of_the_run() -> None:
    model = Held()
    questions = Questions(model)
    first = questions.submit("one")
    assert model.entered.wait(10)
    model.fail = True
    rest = [questions.submit("two"), questions.submit("three")]
    model.release.set()
    for done in [first, *rest]:
        with pytest.raises(RuntimeError, match="the model broke"):
            done.result(10)
    model.fail = False
    assert questions.submit("four").result(10).shape == (1, 384)  # the thread goes on
    questions.close()


def test_close_embeds_what_waits_and_then_refuses() -> None:
    model = Held()
    questions = Questions(model)
    first = questions.submit("one")
    assert model.entered.wait(10)
    second = questions.submit("two")
    closing = threading.Thread(target=questions.close)
    closing.start()
    model.release.set()
    closing.join(10)
    assert not closing.is_alive()
    assert first.result(0).shape == second.result(0).shape == (1, 384)
    with pytest.raises(EmbedderError, match="closed"):
        questions.submit("three")


def test_many_recalls_at_once_answer_as_they_do_one_by_one(tmp_path: Any) -> None:
    with Memory(tmp_path / "m.db", settings=Settings(embedder="fake")) as memory:
        memory.remember_many(
            [
                {"content": f"note {i}: the {w} in the garden needs water on day {i % 7}"}
                for i, w in enumerate(["rose", "tulip", "fern", "oak", "basil", "mint"] * 10)
            ]
        )
        asked = [
            f"which {w} needs water on day {d}?" for w in ("rose", "fern", "mint") for d in range(6)
        ]

        def answer(question: str) -> list[tuple[str, float, float]]:
            response = memory.recall(question, k=5)
            return [(r.memory.id, r.relevance_score, r.ranking_score) for r in response.results]

        one_by_one = [answer(q) for q in asked]
        with ThreadPoolExecutor(8) as pool:
            at_once = list(pool.map(answer, asked * 3))
    assert at_once == one_by_one * 3
