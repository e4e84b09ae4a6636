"""Standing statements: what a memory asks to hold from now on, found without an LLM.

Two kinds, recognised sentence by sentence:

- ``instruction``: a rule for later answers, said as a standing imperative: "Always
  include version numbers when I ask about libraries.", "Never use emojis.", "From now on,
  answer in French.", "Whenever I ask for a recipe, give metric units.", "I want you to
  always cite sources."
- ``preference``: what the speaker prefers or avoids: "I prefer minimal dependencies",
  "I'd rather work in the mornings", "my favourite editor is Vim", "I don't like long
  meetings".

Each comes with its *scope*, the text a later request is compared with to decide whether
the statement applies: the condition of an instruction ("when I ask about libraries" ->
"libraries"), the words around a preference's marker in a long sentence, else the
sentence. Statements by the assistant side of a conversation (advice such as "always
validate input") are not the user's standing instructions and are left out. A memory whose
source is ``system`` or ``developer`` (a chat's system prompt, kept) is instructions
throughout: each of its sentences is one, however it is phrased ("You are a travel
assistant.", "Answer in French.").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from slm.embed import Embedder
from slm.ingest.roles import ASSISTANT, SYSTEM_ROLES, label, role_of

#: At most this many statements are kept per memory (the first ones).
MAX_STATEMENTS = 8
#: A preference's scope: this many words before its marker and after it.
WORDS_BEFORE, WORDS_AFTER = 8, 16

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z])|\n+")
_LEAD = r"^(?:(?:please|and|also|so|oh|just|ok|okay|one more thing)[,:]?\s+)*"
_INSTRUCTION = re.compile(
    _LEAD + r"(?:(?:(?:for|in|on|about|when|whenever|if)\b[^,]{1,80}, )?"
    r"(?:always|never) (?P<verb>[\w']+)|from now on|going forward|"
    r"(?:in )?(?:the )?future,|(?:whenever|every time|each time|any ?time) i |"
    r"(?:when|if) i (?:ask|request|want you|need you|mention|talk to you)\b)"
    r"|\b(?:i want you to|i'd like you to|i would like you to|you should|you must|"
    r"make sure (?:that )?you|remember to) (?:always|never)\b",
    re.IGNORECASE,
)
#: Words after a leading "always" or "never" that make a statement about the past or the
#: speaker ("Never had the chance", "Always here to help"), not a rule.
_NOT_IMPERATIVE = frozenset(
    "had has have saw seen been being here there thought knew was were did got made felt "
    "went came said told heard done am is are thinking up good happy glad great nice fun so "
    "a an the my your his her our their on in at ready willing excited interesting amazing "
    "awesome cool fascinating inspiring".split()
)
_CONDITION = re.compile(
    r"\b(?:when(?:ever)?|if|each time|every time|any ?time)\s+(?:i|we)\s+"
    r"(?:ask|request|inquire|talk|am asking|'m asking|need|want)\b"
    r"(?:\s+(?:you\s+)?(?:about|for|regarding|on|to))?\s+(?P<scope>[^,;]+)"
    r"|\b(?:for|in|on) (?:any |all )?(?:questions|answers|responses|requests|anything) "
    r"(?:about|on|regarding|related to) (?P<topic>[^,;]+)",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(?:(?P<first>(?:i|we|my|our)(?:'d|'m| am| would| really| do| also| usually| still)*"
    r"(?: \w+)?) )?"
    r"(?P<marker>prefers|prefer(?:red|ring|ence|ences|ably)?|rather|favou?rite|"
    r"(?:don't|do not) (?:really )?like|dislike|hate|can't stand|cannot stand|"
    r"not a (?:big )?fan of)\b",
    re.IGNORECASE,
)
_WORDS = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class Statement:
    kind: str
    #: the sentence that states it
    text: str
    #: what a later request is compared with to see whether it falls under it
    scope: str


def sentences(text: str) -> list[str]:
    """Sentences and lines of ``text`` (a full stop inside a number or a version does not
    end a sentence)."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def _is_instruction(sentence: str) -> bool:
    match = _INSTRUCTION.search(sentence)
    if match is None:
        return False
    verb = (match.group("verb") or "").casefold()
    return not (verb in _NOT_IMPERATIVE or verb.endswith(("ed", "ing")))


def _preference_at(sentence: str) -> int | None:
    """Where the speaker's own preference is stated in ``sentence`` ("I prefer", "my
    favourite", "we'd rather"; or "prefers", said of someone), if it is."""
    for match in _PREFERENCE.finditer(sentence):
        if match.group("first") or match.group("marker").casefold() == "prefers":
            return match.start()
    return None


def _preference_scope(sentence: str, start: int) -> str:
    before = _WORDS.findall(sentence[:start])[-WORDS_BEFORE:]
    after = _WORDS.findall(sentence[start:])[: WORDS_AFTER + 1]
    return " ".join(before + after)


def standing_statements(content: str, source: str | None = None) -> list[Statement]:
    """The standing instructions and preferences ``content`` states, in text order."""
    system = source in SYSTEM_ROLES
    if role_of(content, source) == ASSISTANT and not system:
        return []
    _, body = label(content)
    found: list[Statement] = []
    for sentence in sentences(body):
        if len(sentence.split()) < 3:
            continue
        if system or _is_instruction(sentence):
            condition = _CONDITION.search(sentence)
            scope = ""
            if condition is not None:
                scope = condition.group("scope") or condition.group("topic") or ""
            found.append(Statement("instruction", sentence, scope.strip(" .!?") or sentence))
        elif (start := _preference_at(sentence)) is not None:
            found.append(Statement("preference", sentence, _preference_scope(sentence, start)))
        if len(found) == MAX_STATEMENTS:
            break
    return found


def embedded_statements(
    embedder: Embedder, contents: Sequence[str], sources: Sequence[str | None]
) -> list[tuple[tuple[str, str, bytes], ...]]:
    """(kind, statement, vector of its scope) of each text's standing statements, the scopes
    embedded in one batch (what the store keeps for the standing channel)."""
    found = [standing_statements(c, s) for c, s in zip(contents, sources, strict=True)]
    scopes = [statement.scope for statements in found for statement in statements]
    vectors = iter(embedder.embed_batch(scopes) if scopes else ())
    return [
        tuple((st.kind, st.text, next(vectors).astype("<f4").tobytes()) for st in statements)
        for statements in found
    ]
