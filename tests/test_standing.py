"""Standing instructions and preferences: recognised at write time, surfaced when a later
request falls under them, and the roles of a user-assistant conversation."""

from __future__ import annotations

import pytest

from slm import Memory
from slm.ingest.roles import ASSISTANT, USER, asked_about, role_of
from slm.ingest.standing import sentences, standing_statements
from slm.ingest.text import question_topic


@pytest.mark.parametrize(
    ("text", "kind", "scope"),
    [
        (
            "Always include version numbers when I ask about software dependencies.",
            "instruction",
            "software dependencies",
        ),
        ("user: never use emojis in replies", "instruction", "never use emojis in replies"),
        ("Please, from now on answer in French.", "instruction", None),
        ("I want you to always cite your sources.", "instruction", None),
        ("Whenever I mention a deadline, add it to my calendar.", "instruction", None),
        ("For questions about money, always give amounts in euros.", "instruction", "money"),
        ("I prefer minimal dependencies.", "preference", None),
        ("I'd rather work in the mornings.", "preference", None),
        ("Priya prefers tea to coffee.", "preference", None),
        ("Harry Potter is my favourite book.", "preference", None),
        ("I really don't like long meetings.", "preference", None),
    ],
)
def test_statements_are_recognised_with_their_scope(
    text: str, kind: str, scope: str | None
) -> None:
    found = standing_statements(text)
    assert [s.kind for s in found] == [kind]
    assert found[0].scope == (scope if scope is not None else found[0].text)


@pytest.mark.parametrize(
    "text",
    [
        "Never had the chance to visit it.",
        "Always here to help!",
        "Always staying positive.",
        "When I was younger we went to Oregon.",
        "Whenever you need help, just ask.",
        "Do you prefer tea?",
        "What was your favourite part?",
        "I don't know what to do.",
        "The deploy went fine yesterday.",
        "",
    ],
)
def test_ordinary_sentences_are_not_statements(text: str) -> None:
    assert standing_statements(text) == []


def test_the_assistant_side_states_no_standing_instruction() -> None:
    advice = "Always validate input. I prefer explicit code."
    assert standing_statements("assistant: " + advice) == []
    assert standing_statements(advice, source="assistant") == []
    assert len(standing_statements(advice, source="user")) == 2


def test_a_preference_in_a_long_sentence_is_scoped_to_its_words() -> None:
    text = (
        "I'm trying to keep the app small and easy to maintain for the next release of the "
        "budget tracker, so I prefer simple, minimal dependencies, how can I make sure that "
        "the Flask app stays minimal while still implementing every feature on the roadmap?"
    )
    (statement,) = standing_statements(text)
    assert "I prefer simple, minimal dependencies" in statement.scope
    assert len(statement.scope.split()) <= 25 < len(statement.text.split())


def test_sentences_do_not_end_inside_versions_or_numbers() -> None:
    assert sentences("I use Flask 2.3.1 and Python 3.11. Always pin versions.") == [
        "I use Flask 2.3.1 and Python 3.11.",
        "Always pin versions.",
    ]


def test_roles() -> None:
    assert role_of("user: hi", None) == USER
    assert role_of("hi", "assistant") == ASSISTANT
    assert role_of("Caroline: hi", "Caroline") is None
    assert asked_about("What did you recommend for caching?") == ASSISTANT
    assert asked_about("When does my first sprint end?") == USER
    assert asked_about("When did Caroline move?") is None


@pytest.mark.parametrize(
    ("question", "topic"),
    [
        (
            "Can you list the order in which I brought up different aspects of my budget "
            "tracker throughout our conversations, in order?",
            "my budget tracker?",
        ),
        (
            "Can you give me a comprehensive summary of how my weather app progressed?",
            "how my weather app progressed?",
        ),
        ("When did Caroline move to Lisbon?", "When did Caroline move to Lisbon?"),
        ("What aspects of Harry Potter's world?", "What aspects of Harry Potter's world?"),
        ("Can you summarize?", "Can you summarize?"),
    ],
)
def test_question_topic_drops_talk_about_the_conversation(question: str, topic: str) -> None:
    assert question_topic(question) == topic


FILLER = [
    "We deployed the budget tracker to Render on Friday.",
    "The login form now validates email addresses.",
    "I finished the monthly summary chart with Matplotlib.",
    "My sister visits next weekend.",
    "The database migration added a notes column.",
    "Lunch with Sam was great, we talked about hiking.",
    "I fixed the bug where expenses were counted twice.",
    "The CI pipeline runs the tests on every push.",
]


def test_an_instruction_surfaces_for_a_request_it_covers(real_memory: Memory) -> None:
    """The request shares no word with the instruction's memory but falls under it."""
    rule = real_memory.remember(
        "user: Always include version numbers when I ask about software dependencies."
    )
    real_memory.remember_many([{"content": f"user: {text}"} for text in FILLER])
    response = real_memory.recall("Which libraries does this project use?", k=5)
    assert rule.id in [r.id for r in response.results]
    assert response.results[[r.id for r in response.results].index(rule.id)].channels["standing"]
    # A request it does not cover is not answered with it first.
    other = real_memory.recall("Who visits next weekend?", k=3)
    assert other.results[0].id != rule.id


def test_a_preference_surfaces_for_a_request_about_its_subject(real_memory: Memory) -> None:
    liked = real_memory.remember(
        "user: I'm setting up the new laptop this week, and I prefer light themes with "
        "large fonts in every editor, can you help me choose a terminal?"
    )
    real_memory.remember_many([{"content": f"user: {text}"} for text in FILLER])
    response = real_memory.recall("How should I configure the look of my code editor?", k=5)
    assert liked.id in [r.id for r in response.results]


def test_a_first_person_question_favours_what_the_user_said(real_memory: Memory) -> None:
    said = real_memory.remember("user: My first sprint ends on March 29.", source="user")
    echo = real_memory.remember(
        "assistant: Great, with the first sprint ending on March 29 we can plan the "
        "registration and login work in two weeks; here is a day by day plan for the "
        "sprint that ends on March 29, with reviews on each Friday.",
        source="assistant",
    )
    real_memory.remember_many([{"content": f"user: {text}", "source": "user"} for text in FILLER])
    ids = [r.id for r in real_memory.recall("When does my first sprint end?", k=5).results]
    assert ids.index(said.id) < ids.index(echo.id)
