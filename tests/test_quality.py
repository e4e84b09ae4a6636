"""Recall quality with the real model on a small hand-written fixture."""

from __future__ import annotations

import pytest

from slm import Memory

FACTS = [
    "Priya is allergic to cats and peanuts",
    "The office wifi password is taped under the router",
    "Tom's daughter Ellie starts kindergarten in September",
    "We agreed to deploy the billing service only on Thursdays",
    "Grandma's lasagne recipe uses nutmeg in the béchamel",
    "The car's next MOT inspection is due in March",
    "Marco prefers to be contacted on Signal rather than email",
    "The team offsite will be in a cabin near Lake Tahoe",
    "My passport expires in 2027 and needs renewing",
    "The dentist appointment was moved to Friday at 3pm",
    "Sarah ran her first marathon in Chicago last autumn",
    "The production database backups run nightly at 2am UTC",
]

QUESTIONS = [
    ("What food allergies does Priya have?", 0),
    ("How do I get on the office network?", 1),
    ("When does Ellie begin school?", 2),
    ("Which day are we allowed to ship billing changes?", 3),
    ("What spice goes in the white sauce of the lasagne?", 4),
    ("When is the vehicle inspection due?", 5),
    ("What is the best way to reach Marco?", 6),
    ("Where is the company retreat?", 7),
    ("When do I need a new travel document?", 8),
    ("When is my dental checkup?", 9),
    ("Which city did Sarah run a race in?", 10),
    ("How often is the database backed up?", 11),
]


@pytest.fixture
def facts(real_memory: Memory) -> list[str]:
    return [r.id for r in real_memory.remember_many([{"content": f} for f in FACTS])]


@pytest.mark.parametrize(("question", "answer"), QUESTIONS)
def test_answer_is_ranked_first(
    real_memory: Memory, facts: list[str], question: str, answer: int
) -> None:
    response = real_memory.recall(question, k=3)
    assert not response.abstained
    assert response.results[0].id == facts[answer], [r.memory.content for r in response.results]


def test_answers_outscore_unrelated_questions(real_memory: Memory, facts: list[str]) -> None:
    answered = [real_memory.recall(q, k=1).results[0].relevance_score for q, _ in QUESTIONS]
    unrelated = []
    for q in [
        "What is the airspeed of an unladen swallow?",
        "Explain quantum chromodynamics",
        "Who won the 1930 football world cup?",
    ]:
        response = real_memory.recall(q, k=1)
        unrelated.append(0.0 if response.abstained else response.results[0].relevance_score)
    assert min(answered) > max(unrelated)


CHAT = [
    "Melanie: My kids and I made pottery bowls in a class on Saturday",
    "Caroline: Melanie, your kids are so sweet! I love kids.",
    "Caroline: Thanks, Melanie! Your kind words mean a lot.",
    "Caroline: Wow, Melanie, that is awesome!",
    "Melanie: We went camping at the beach with the kids last weekend",
    "Caroline: I joined a mentorship program for LGBTQ youth",
    "Caroline: Hey Melanie! Just wanted to say hi!",
    "Melanie: Yeah, Caroline! I'll think about what we can do.",
]


def test_a_question_about_a_speaker_is_answered_by_what_they_said(real_memory: Memory) -> None:
    """Every turn names Melanie, as its speaker or to address her; the answers are her own
    turns on the topic, ahead of Caroline's turn about Melanie's kids."""
    ids = [r.id for r in real_memory.remember_many([{"content": c} for c in CHAT])]
    response = real_memory.recall("What did Melanie do with her kids?", k=4, trace=True)
    ranked = [r.id for r in response.results]
    assert set(ranked[:2]) == {ids[0], ids[4]}, [r.memory.content for r in response.results]
    assert ranked[2] == ids[1]
    assert response.trace is not None
    # the names of people who speak in the store are left out of the embedded text ...
    assert response.trace["query"]["embedded_text"] == "What did do with her kids?"
    # ... other names stay in it, known or not
    for name in ("Gina", "LGBTQ"):
        trace = real_memory.recall(f"What did {name} do?", trace=True).trace
        assert trace is not None and trace["query"]["embedded_text"] == f"What did {name} do?"
