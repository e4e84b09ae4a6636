"""What a hook injects into the host's context: for a prompt, the memories of the project
that recall finds above the evidence floor and a minimum relevance, as a short block; at
the start of a session, the project's standing instructions and what the last sessions did.

A block lists each memory as its date, relevance, id and text (cut to fit), within a
character budget, so the agent can fetch a whole memory through MCP ``get``. Memories of the
prompt's own session are left out (the host has them in context already). When recall
abstains, or nothing is above the minimum, nothing at all is injected, and the reason is
kept (:class:`Injection`) for the journal the page shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slm.contract import ABSTENTION_WORDS
from slm.engine import Memory
from slm.hosts.hooks.project import PROJECT_KEY
from slm.ingest.standing import standing_statements
from slm.models import MemoryRecord

#: The shipped minimum relevance a recalled memory needs to be injected (chosen on
#: ``slm bench hooks``'s trade-off, docs/hooks.md).
DEFAULT_MINIMUM = 0.6
#: The most characters a block may have.
DEFAULT_BUDGET = 1500
#: How many memories recall is asked for (before those of the prompt's session are dropped).
RECALL_K = 8
#: The most memories a block shows.
MAX_SHOWN = 5
#: The most characters of one memory's text in a block.
ITEM_CHARS = 400
#: The longest prompt recalled (a longer one is cut: a query is at most 4 KiB).
PROMPT_CHARS = 1000
#: Why nothing was injected.
ABSTAINED, BELOW_MINIMUM, EMPTY_PROMPT, INJECTED = (
    "abstained",
    "below minimum",
    "empty prompt",
    "injected",
)
#: The head line of a prompt's block.
PROMPT_HEAD = (
    "slm recalled these memories of earlier sessions in this project for the prompt "
    "(relevance 0..1; MCP tool `get` with an id returns a whole memory):"
)
_START_HEAD = "slm: what this project's earlier sessions left (MCP `recall` finds more):"


@dataclass(frozen=True, slots=True)
class Injection:
    """The block (empty: nothing injected), why, and what it shows (id, relevance)."""

    block: str
    why: str
    shown: tuple[tuple[str, float | None], ...] = ()
    detail: str = ""
    best: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def for_prompt(
    memory: Memory,
    prompt: str,
    project: str,
    session: str | None,
    *,
    minimum: float = DEFAULT_MINIMUM,
    budget: int = DEFAULT_BUDGET,
) -> Injection:
    """The block for ``prompt`` (UserPromptSubmit)."""
    query = _cut(prompt.strip(), PROMPT_CHARS)
    if not query:
        return Injection("", EMPTY_PROMPT)
    response = memory.recall(query, k=RECALL_K, metadata={PROJECT_KEY: project})
    others = [r for r in response.results if r.memory.metadata.get("session") != session]
    best = max((r.relevance_score for r in others), default=None)
    if response.abstained:
        reason = response.abstention_reason or ""
        return Injection("", ABSTAINED, detail=ABSTENTION_WORDS.get(reason, reason), best=best)
    candidates = [
        (r.id, round(r.relevance_score, 4), len(" ".join(r.memory.content.split()))) for r in others
    ]
    extra = {"candidates": candidates}
    kept = [r for r in others if r.relevance_score >= minimum][:MAX_SHOWN]
    if not kept:
        detail = f"best {best:.2f} < {minimum:.2f}" if best is not None else "none of others"
        return Injection("", BELOW_MINIMUM, detail=detail, best=best, extra=extra)
    lines, shown = _lines([(r.memory, r.relevance_score) for r in kept], budget, PROMPT_HEAD)
    return Injection("\n".join(lines), INJECTED, tuple(shown), best=best, extra=extra)


def for_start(
    memory: Memory, project: str, session: str | None, *, budget: int = DEFAULT_BUDGET
) -> Injection:
    """The block for a session's start: the project's standing instructions (newest first)
    and the observations of its latest sessions."""
    recent = memory.list(limit=300, metadata={PROJECT_KEY: project})
    recent = [m for m in recent if m.metadata.get("session") != session]
    rules = [m for m in recent if m.metadata.get("role") == "user" and _standing(m)][:4]
    done = [m for m in recent if m.metadata.get("kind") == "observation"][:3]
    chosen: list[tuple[MemoryRecord, float | None]] = [(m, None) for m in (*rules, *done)]
    if not chosen:
        return Injection("", BELOW_MINIMUM, detail="no instructions or observations stored")
    lines, shown = _lines(chosen, budget, _START_HEAD)
    return Injection("\n".join(lines), INJECTED, tuple(shown))


def _standing(record: MemoryRecord) -> bool:
    return bool(standing_statements(record.content, record.source))


def _lines(
    items: list[tuple[MemoryRecord, float | None]], budget: int, head: str
) -> tuple[list[str], list[tuple[str, float | None]]]:
    labels, texts = [], []
    for record, relevance in items:
        when = (record.event_time or record.recorded_at).date().isoformat()
        score = "" if relevance is None else f" | relevance {relevance:.2f}"
        labels.append(f"- [{when}{score} | id {record.id}] ")
        texts.append(" ".join(record.content.split()))
    rooms = fit([(len(a), len(b)) for a, b in zip(labels, texts, strict=True)], budget, len(head))
    lines = [head] + [labels[i] + _cut(texts[i], room) for i, room in enumerate(rooms)]
    shown = [
        (record.id, None if relevance is None else round(relevance, 4))
        for record, relevance in items[: len(rooms)]
    ]
    return lines, shown


def fit(sizes: Sequence[tuple[int, int]], budget: int, head: int) -> list[int]:
    """How many characters of each item's text a block shows, for items of (label, text)
    sizes in order after a head line of ``head`` characters, within ``budget`` characters
    (lines joined by newlines): each text cut to :data:`ITEM_CHARS` and to what is left,
    and no item once fewer than 40 characters are left for its text."""
    rooms, used = [], head
    for label, text in sizes:
        room = min(ITEM_CHARS, budget - used - label - 1)
        if room < 40:
            break
        rooms.append(min(room, text))
        used += label + min(room, text) + 1
    return rooms


def prompt_label(relevance: float, memory_id: str) -> int:
    """The size of a prompt block's label of a memory (what :func:`fit` is given)."""
    return len(f"- [2000-01-01 | relevance {relevance:.2f} | id {memory_id}] ")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 3)].rstrip() + "..."
