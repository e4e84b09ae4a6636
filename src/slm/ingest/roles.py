"""Roles in a conversation between a user and an assistant, read without an LLM.

A memory's role comes from its source or from the label its text opens with
(``"user: ..."``, ``"assistant: ..."``). A question's role is whose words it asks about:
an agent's user asks "when does *my* sprint end?" about what the user said, and "what
did *you* recommend?" about the assistant's answers.
"""

from __future__ import annotations

import re

USER = "user"
ASSISTANT = "assistant"
USER_ROLES = frozenset({"user", "human", "me"})
#: Speakers and sources whose words are the agent's, not the user's.
ASSISTANT_ROLES = frozenset({"assistant", "ai", "bot", "agent", "model", "system"})
#: Sources of the application's instructions to the model (a chat's system prompt): every
#: sentence such a memory says is a standing instruction.
SYSTEM_ROLES = frozenset({"system", "developer"})

_LABEL = re.compile(r"^\s*([A-Za-z][\w .'-]{0,38}):\s+")
_ABOUT_ASSISTANT = re.compile(
    r"\b(?:did|have|had|would) you\b|\byou(?:'ve| have)? (?:recommend|suggest|said|mention|"
    r"told|advis|propos|explain|gave|provid|outline|describ|share)\w*",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|me|mine|myself)\b", re.IGNORECASE)


def label(content: str) -> tuple[str | None, str]:
    """The ``Name:`` label a turn opens with (at most three words), if any, and the text
    after it."""
    match = _LABEL.match(content)
    if match is None or len(match.group(1).split()) > 3:
        return None, content
    return match.group(1).strip(), content[match.end() :]


def role_of(content: str, source: str | None) -> str | None:
    """``USER``, ``ASSISTANT`` or None (neither the source nor the label says)."""
    for name in (source, label(content)[0]):
        folded = (name or "").casefold()
        if folded in USER_ROLES:
            return USER
        if folded in ASSISTANT_ROLES:
            return ASSISTANT
    return None


def asked_about(question: str) -> str | None:
    """Whose words ``question`` asks about: the assistant's ("what did you recommend"),
    the user's (a question in the first person), or None."""
    if _ABOUT_ASSISTANT.search(question):
        return ASSISTANT
    if _FIRST_PERSON.search(question):
        return USER
    return None
