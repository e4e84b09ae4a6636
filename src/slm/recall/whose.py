"""Whose memory "I" is: within one user's scope, a question about that user in the third
person is read in the first person.

An agent serving a user stores that user's words as they are ("I live in Porto", under
``metadata={"user_id": "alice"}``), then asks on the user's behalf, naming them: "Where
does alice live?", "What is the user's job?", "What car does my user drive?". In a recall
filtered to one user (its metadata filter names exactly one ``user_id``), the question
names that user when it says the user's id as a word ("alice", any case) or "the user",
"my user", "this user", "our user"; the memories that user wrote in the first person are
about them. :func:`first_person` gives the question as that user would ask it ("Where do
I live?", "What is my job?"), which the recall reads as well as the question itself: its
terms (for BM25 and the evidence), the text its embedding is made from, the facts it asks
about and whose words it asks about (``slm.recall.interpret``). The names themselves stay
among its entities, so memories that speak of the user by name are found as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

#: The metadata key whose value is the user a recall is for.
USER_KEY = "user_id"
#: Words that name the user an agent serves, whoever it is.
THE_USER = ("the user", "my user", "this user", "our user")
#: Nouns "user" qualifies when it names no one ("the user interface", "the user feedback").
_NOT_A_PERSON = (
    "interface|feedback|experience|base|data|id|ids|account|accounts|guide|story|stories|"
    "testing|tests|research|input|session|sessions|name|manual|group|groups|agent|agents|"
    "profile|profiles|flow|flows|journey|journeys|needs|engagement|satisfaction|acceptance|"
    "authentication|management|permissions|role|roles|settings|model|models|table|record|"
    "records|count|counts|list|object|type|types|level|levels|request|requests|query|queries"
)
#: An auxiliary before the user, as it reads before "I".
_AUX = {
    "does": "do",
    "is": "am",
    "has": "have",
    "was": "was",
    "did": "did",
    "will": "will",
    "would": "would",
    "can": "can",
    "could": "could",
    "should": "should",
    "had": "had",
}
#: Words after which the user is a clause's subject ("I"), not its object ("me").
_SUBJECT_AFTER = frozenset(
    "that and or but when if where what who whom which how why whether because so while".split()
)
#: Ids that are pronouns already: a question's "I" or "me" is no third person.
_PRONOUNS = frozenset("i me my mine you your we us our he him his she her it its they them".split())
#: A user id read as a word: letters, digits and ``._-`` (an id of other characters is
#: not a word of a question).
_WORDLIKE = re.compile(r"\w[\w.-]*")


def scoped_user(metadata: Sequence[tuple[str, tuple[Any, ...]]]) -> str | None:
    """The one user a recall's metadata filter names (``Filters.metadata``), else None."""
    for key, values in metadata:
        if key == USER_KEY and len(values) == 1 and isinstance(values[0], str):
            return values[0]
    return None


def first_person(question: str, user: str | None) -> str | None:
    """``question`` as ``user`` would ask it, or None when it names neither them nor "the
    user"."""
    names = [re.escape(name) for name in THE_USER]
    if (
        user is not None
        and _WORDLIKE.fullmatch(user.strip())
        and user.strip().casefold() not in _PRONOUNS
    ):
        names.insert(0, re.escape(user.strip()))
    who = rf"(?<![\w-])(?:{'|'.join(names)})(?![\w-])(?!\s+(?:{_NOT_A_PERSON})\b)"
    if not re.search(who, question, re.IGNORECASE):
        return None
    text = re.sub(rf"{who}\s*(?:['\u2019]s?)(?!\w)", "my", question, flags=re.IGNORECASE)
    aux = "|".join(_AUX)
    text = re.sub(
        rf"\b({aux})\s+{who}",
        lambda m: f"{_cased(_AUX[m.group(1).lower()], m.group(1))} I",
        text,
        flags=re.IGNORECASE,
    )
    return re.sub(who, lambda m: _pronoun(text, m.start()), text, flags=re.IGNORECASE)


def _pronoun(text: str, at: int) -> str:
    """ "I" where the user is a clause's subject (its start, after punctuation or a
    conjunction or question word), else "me"."""
    before = text[:at].rstrip()
    if not before or before[-1] in ",.;:!?(\"'":
        return "I"
    word = re.search(r"(\w+)$", before)
    return "I" if word is not None and word.group(1).lower() in _SUBJECT_AFTER else "me"


def _cased(word: str, like: str) -> str:
    return word.capitalize() if like[:1].isupper() else word
