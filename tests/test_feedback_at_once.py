"""What use teaches at once (slm.recall.feedback): a memory marked not useful for a question
moves down for it and questions like it on the next recall, by default, on both stores,
with its relevance_score unchanged; one marked useful moves up."""

from __future__ import annotations

import pytest

from slm import Memory
from slm.recall import feedback

NOTES = [
    "Priya lives in Lisbon with her two cats",
    "Priya moved to Lisbon in 2021 for a job at Globex",
    "Deploys happen on Thursdays after the standup",
]
QUESTION = "Where does Priya live?"


def test_alike_is_the_overlap_of_terms() -> None:
    a, b = frozenset({"priya", "live"}), frozenset({"priya", "live", "now"})
    assert feedback.alike(a, b) == pytest.approx(2 / 3)
    assert feedback.alike(a, frozenset()) == 0.0
    nets = feedback.nets(
        "Where does Priya live?",
        {
            "m1": [(False, "Where does Priya live?"), (False, "where does priya live now")],
            "m2": [(True, "Where does Priya live?"), (False, "When are deploys?")],
            "m3": [(False, "When are deploys?")],
        },
    )
    assert nets["m1"] == pytest.approx(-1 - 2 / 3)
    assert nets["m2"] == pytest.approx(1.0)
    assert "m3" not in nets  # an unrelated question teaches nothing here


def test_not_useful_moves_the_top_memory_down_at_once(real_memory: Memory) -> None:
    memory = real_memory
    memory.remember_many([{"content": text} for text in NOTES])
    before = memory.recall(QUESTION, k=3)
    top = before.results[0]
    relevance = {r.id: r.relevance_score for r in before.results}
    for _ in range(25):
        response = memory.recall(QUESTION, k=3)
        memory.feedback(top.id, useful=False, query_id=response.query_id)
    after = memory.recall(QUESTION, k=3, trace=True)
    assert after.results[0].id != top.id
    assert {r.id: r.relevance_score for r in after.results} == relevance
    assert after.trace is not None and after.trace["feedback"][top.id] < 0
    # a question like it moves too; an unrelated one does not see the labels
    alike = memory.recall("where does Priya live now", k=3)
    assert alike.results[0].id != top.id
    unrelated = memory.recall("When do deploys happen?", k=3, trace=True)
    assert unrelated.trace is not None and top.id not in unrelated.trace["feedback"]
    # forgetting the feedback restores the order
    memory.reset_feedback()
    assert memory.recall(QUESTION, k=3).results[0].id == top.id


def test_useful_moves_a_memory_up(real_memory: Memory) -> None:
    memory = real_memory
    memory.remember_many([{"content": text} for text in NOTES])
    second = memory.recall(QUESTION, k=3).results[1]
    for _ in range(3):
        response = memory.recall(QUESTION, k=3)
        memory.feedback(second.id, useful=True, query_id=response.query_id)
    assert memory.recall(QUESTION, k=3).results[0].id == second.id


def test_feedback_without_a_recall_does_not_reorder(real_memory: Memory) -> None:
    memory = real_memory
    memory.remember_many([{"content": text} for text in NOTES])
    top = memory.recall(QUESTION, k=3).results[0]
    for _ in range(5):
        memory.feedback(top.id, useful=False)  # trust only: no question to learn from
    assert memory.recall(QUESTION, k=3).results[0].id == top.id
