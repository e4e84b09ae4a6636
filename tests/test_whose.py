"""Whose memory "I" is: within a user's scope, a question naming that user ("alice", "the
user", "my user") reads their first-person memories as about them (slm/recall/whose.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from slm import Memory
from slm.cli import cli
from slm.recall.whose import first_person, scoped_user


@pytest.mark.parametrize(
    ("question", "read"),
    [
        ("Where does alice live?", "Where do I live?"),
        ("What is the user's job?", "What is my job?"),
        ("what does Alice do for a living", "what do I do for a living"),
        ("Is alice allergic to anything?", "Am I allergic to anything?"),
        ("What car does my user drive?", "What car do I drive?"),
        ("How old is this user?", "How old am I?"),
        ("What did the assistant recommend to alice?", "What did the assistant recommend to me?"),
        ("Where is Alice' sister based?", "Where is my sister based?"),
    ],
)
def test_a_question_naming_the_user_is_read_in_the_first_person(question: str, read: str) -> None:
    assert first_person(question, "alice") == read


def test_only_the_user_a_recall_is_for() -> None:
    assert first_person("Where does bob live?", "alice") is None
    assert first_person("Where does malice live?", "alice") is None
    assert first_person("Where do I live?", "alice") is None
    assert first_person("Where does the user live?", None) == "Where do I live?"
    assert first_person("How did the user feedback change the UI?", "alice") is None
    assert first_person("Where do I live?", "I") is None  # an id that is a pronoun
    assert scoped_user((("user_id", ("alice",)),)) == "alice"
    assert scoped_user((("user_id", ("alice", "bob")),)) is None  # two users: no one "I"
    assert scoped_user((("agent_id", ("alice",)),)) is None


ALICE = [
    "I live in Porto, in a small flat near the river.",
    "I work as a nurse at the children's hospital.",
    "My sister lives in Madrid with her two kids.",
    "I'm allergic to peanuts.",
]
BOB = ["I live in Berlin.", "I work as a pilot."]


def test_third_person_questions_find_first_person_memories(real_memory: Memory) -> None:
    alice = real_memory.remember_many(
        [{"content": t, "metadata": {"user_id": "alice"}} for t in ALICE]
    )
    real_memory.remember_many([{"content": t, "metadata": {"user_id": "bob"}} for t in BOB])
    home, job, sister = alice[0].id, alice[1].id, alice[2].id
    mine = {"user_id": "alice"}
    for question, answer in [
        ("Where does alice live?", home),
        ("Where does the user live?", home),
        ("What is the user's job?", job),
        ("what does alice do for a living", job),
    ]:
        found = real_memory.recall(question, metadata=mine, k=3)
        assert found.ids and found.ids[0] == answer, question
        assert sister not in found.ids[:1]
    traced = real_memory.recall("Where does Alice live?", metadata=mine, trace=True)
    assert traced.trace is not None
    assert traced.trace["query"]["first_person"] == "Where do I live?"
    # Not filtered to one user, no one is "I": the question is read as it is.
    everyone = real_memory.recall("Where does Alice live?", trace=True)
    assert everyone.trace is not None and everyone.trace["query"]["first_person"] is None


def test_the_dev_set_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``slm bench whose`` on the set the reading was written on (the blind set is measured,
    never asserted: docs/scopes.md)."""
    monkeypatch.setenv("SLM_EMBEDDER", "minilm")
    out = tmp_path / "whose.json"
    data = Path(__file__).resolve().parents[1] / "bench-data" / "whose-dev.json"
    result = CliRunner().invoke(
        cli, ["bench", "whose", "--data", str(data), "--out", str(out), "--quiet"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["questions"] == 25 and report["command"].startswith("slm bench whose")
    assert report["hit@1"] >= 0.8 and report["abstained"] <= 2  # 0.88 and 1 measured; 0.6, 9
