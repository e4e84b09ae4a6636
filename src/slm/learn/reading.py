"""Reading a candidate against the question, without a model: whether it carries the kind
of value the question asks for, and how much of the question's focus it says.

- *Answer type*: "when" and "what year" want a date or a time ("in May", "yesterday",
  "2022"); "how many", "how much", "how long" a number; "where" a place (a name after
  "in", "at", "to", "from"); "who" a person named. A question of none of these kinds
  (what, which, why, how) reads every candidate as 0.
- *Focus*: the question's terms that are not names (the names say whose memory it is, the
  rest what it is about: "paint" in "What did Caroline paint?"), and the share of them the
  candidate contains (read from the lexical index, not from the text again).
- *A reply*: the turn before the candidate asks something ("How was the waterfall?"): in a
  conversation the answer is often the reply, and the question's words are in the turn
  that asked (how alike that turn is to the question, when another speaker said it, is
  the feature ``replied_to``, read from the recall's similarities in ``features``).
- *Names it brings*: the names the candidate mentions that the question does not ("We
  played Catan" for "What game did Nate play?"): an answer names what was asked about.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

from slm.ingest import timewords as words
from slm.ingest.text import terms

_WHEN = re.compile(
    r"^\W*(?:when|since when|what (?:year|month|day|date|time)|which (?:year|month|day|date)|"
    r"how long ago|at what time|on what (?:day|date))\b|\bwhen (?:did|was|were|is|does|do|will)\b",
    re.IGNORECASE,
)
_NUMBER = re.compile(
    r"\bhow (?:many|much|long|often|old|far|big|tall|heavy|fast)\b|\bwhat (?:percentage|number|"
    r"amount|price|age|score)\b",
    re.IGNORECASE,
)
_WHERE = re.compile(
    r"^\W*where\b|\b(?:which|what) (?:city|country|town|place|state|restaurant|school|"
    r"university|company|shop|store|venue|park|museum|neighbou?rhood)\b",
    re.IGNORECASE,
)
_WHO = re.compile(r"^\W*(?:who|whom|whose)\b|\bwith whom\b", re.IGNORECASE)

_DATE = re.compile(
    rf"\b(?:(?:{words.MONTH_ANY})\b|(?:{words.WEEKDAY_ALT})s?\b|"
    r"(?:19|20)\d\d\b|yesterday|today|tonight|tomorrow|ago\b|last (?:week|month|year|night|"
    r"weekend|summer|winter|spring|fall|autumn|time)|next (?:week|month|year|weekend)|"
    r"this (?:morning|afternoon|evening|week|weekend|month|year)|recently|\d{1,2}[/.-]\d{1,2}"
    r"|\d{1,2}(?::\d\d)? ?(?:am|pm)\b|\d{1,2}:\d\d)",
    re.IGNORECASE,
)
_QUANTITY = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|"
    r"thirty|forty|fifty|hundred|thousand|million|dozen|couple|several|once|twice|half)\b",
    re.IGNORECASE,
)
_PLACE = re.compile(
    r"\b(?:in|at|to|from|near|visit(?:ed|ing)?|around) (?:the )?[A-Z][\w'-]+|"
    r"\b(?:city|town|village|country|park|beach|museum|restaurant|cafe|café|store|shop|"
    r"school|office|gym|church|hospital|airport|library|studio|lake|mountains?)\b"
)
#: A capitalised word inside a sentence (not its first word, not "I"): most often a name.
_NAMED = re.compile(r"(?<=[a-z,;] )(?!I\b)[A-Z][a-z]+")
_RELATION = re.compile(
    r"\b(?:mom|mum|mother|dad|father|sister|brother|wife|husband|partner|friend|son|"
    r"daughter|boss|manager|colleague|teacher|doctor|aunt|uncle|cousin|grandma|grandpa|family|"
    r"kids|children|parents)\b",
    re.IGNORECASE,
)
#: A capitalised word anywhere: what a question names, to tell a candidate's new names from.
_CAPITALISED = re.compile(r"[A-Z][a-z]+")
#: A speaker's label ("Maya: ...") is at most this long.
_LABEL = 40
_CARRIES = {"when": _DATE, "number": _QUANTITY, "place": _PLACE}
#: A long memory is read for the answer type in its first this many characters: the
#: reranker reads 50 candidates in every recall, and a long message is mostly context.
READ_CHARS = 2000
#: Memories read again by later recalls are read once: their heads (at most READ_CHARS
#: characters each) are kept, this many of them.
_HEADS_KEPT = 4096


def answer_type(question: str) -> str | None:
    """The kind of value ``question`` asks for: ``when``, ``number``, ``place``, ``person``
    or None."""
    if _WHEN.search(question):
        return "when"
    if _NUMBER.search(question):
        return "number"
    if _WHERE.search(question):
        return "place"
    if _WHO.search(question):
        return "person"
    return None


def carries(kind: str | None, content: str) -> bool:
    """Whether ``content`` holds a value of ``kind`` (:func:`answer_type`) in its first
    :data:`READ_CHARS` characters."""
    return False if kind is None else _carries(kind, content[:READ_CHARS])


@lru_cache(maxsize=_HEADS_KEPT)
def _carries(kind: str, head: str) -> bool:
    if kind == "person":
        return bool(_NAMED.search(head) or _RELATION.search(head))
    return bool(_CARRIES[kind].search(head))


def focus_terms(question_terms: Iterable[str], names: Iterable[str]) -> frozenset[str]:
    """The question's terms less the terms of the names it mentions."""
    named = {term for name in names for term in terms(name)}
    return frozenset(question_terms) - named


def focus(wanted: frozenset[str], held: set[str]) -> float:
    """The share of ``wanted`` (:func:`focus_terms`) among ``held``, the question's terms a
    memory contains (read from the lexical index: ``Lexicon.matched``)."""
    if not wanted:
        return 0.0
    return len(wanted & held) / len(wanted)


def asks(content: str) -> bool:
    """Whether ``content`` asks something: a question mark in its last 80 characters."""
    return "?" in content.rstrip()[-80:]


def new_names(question: str, content: str) -> int:
    """How many names ``content`` mentions (in its first :data:`READ_CHARS` characters,
    its speaker's label aside) that ``question`` does not."""
    return len(_names(content[:READ_CHARS]) - _capitalised(question))


@lru_cache(maxsize=_HEADS_KEPT)
def _names(head: str) -> frozenset[str]:
    """The names a memory's head mentions, its speaker's label aside."""
    label, colon, said = head.partition(":")
    if colon and len(label) < _LABEL:
        head = said
    return frozenset(_NAMED.findall(head))


@lru_cache(maxsize=256)
def _capitalised(question: str) -> frozenset[str]:
    return frozenset(_CAPITALISED.findall(question))


def describe(features: Mapping[str, float]) -> str:
    """What the reranker read of one result (its feature row by name), in words, as
    ``slm trace`` and the page show it."""
    holds = "holds" if features.get("answer_type") else "lacks"
    parts = [
        f"{holds} the kind of value asked for",
        f"focus {features.get('focus', 0.0):.2f}",
        f"found by {features.get('channels', 0.0):.0%} of channels",
    ]
    if features.get("replied_to"):
        asked = "a question" if features.get("reply") else "a turn"
        alike = features["replied_to"]
        parts.append(f"replies to {asked} of similarity {alike:.2f} to the question")
    elif features.get("reply"):
        parts.append("follows a question")
    return ", ".join(parts)
