"""What a hook injects into the host's context: for a prompt, the memories of the project
that recall finds about it, as a short block; at the start of a session, the project's
standing instructions and what the last sessions did.

Whether a prompt gets a block and what the block holds are two rules (:class:`Rule`): a
block is injected only when recall did not abstain (the evidence floor) and its top memory
of another session reaches the **gate**; then the next memories that reach the **floor**
(an absolute relevance, and a share of the top's) follow it, up to :attr:`Rule.most` within
the character budget. Short memories are shown whole; a long one is shown as an excerpt
around the part that best matches the prompt rather than left out (:func:`fit`). Each
memory is listed as its date, relevance, id and text, so the agent can fetch a whole memory
through MCP ``get``. Memories of the prompt's own session are left out (the host has them
in context already). When nothing is injected the reason is kept (:class:`Injection`) for
the journal the page shows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slm.contract import ABSTENTION_WORDS
from slm.engine import Memory
from slm.hosts.hooks.project import PROJECT_KEY
from slm.ingest.standing import standing_statements
from slm.models import MemoryRecord

#: The most characters a block may have.
DEFAULT_BUDGET = 1500
#: How many memories recall is asked for (before those of the prompt's session are dropped).
RECALL_K = 10
#: The fewest characters of a memory's text a block shows (a longer memory is cut to an
#: excerpt, never below this; a memory with no room for it is left out).
EXCERPT_MIN = 120
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
class Rule:
    """When a prompt gets a block, and what follows its top memory in it.

    ``gate``: the relevance the top memory (of another session) needs for anything to be
    injected; ``floor`` and ``ratio``: what each following memory needs, at least ``floor``
    and at least ``ratio`` times the top's relevance; ``most``: the most memories shown;
    ``budget``: the most characters of the block. The shipped values were chosen on ``slm
    bench hooks``'s trade-off (docs/hooks.md)."""

    gate: float = 0.5
    floor: float = 0.2
    ratio: float = 0.0
    most: int = 10
    budget: int = DEFAULT_BUDGET

    def __post_init__(self) -> None:
        for name in ("gate", "floor", "ratio"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"the hook's {name} must be between 0 and 1, not {value}")
        if self.most < 1 or self.budget < len(PROMPT_HEAD) + 100:
            raise ValueError("a block needs room for at least one memory")

    def select(self, candidates: Sequence[tuple[str, float, int]]) -> list[tuple[int, int]]:
        """Which of ``candidates`` ((id, relevance, text length), in rank order) a block
        shows, as (index, characters of its text shown); empty: nothing is injected."""
        if not candidates or candidates[0][1] < self.gate:
            return []
        top = candidates[0][1]
        bar = max(self.floor, self.ratio * top)
        chosen = [0] + [i for i in range(1, len(candidates)) if candidates[i][1] >= bar]
        chosen = chosen[: self.most]
        sizes = [
            (prompt_label(candidates[i][1], candidates[i][0]), candidates[i][2]) for i in chosen
        ]
        rooms = fit(sizes, self.budget, len(PROMPT_HEAD))
        return list(zip(chosen[: len(rooms)], rooms, strict=True))


#: The shipped rule.
DEFAULT_RULE = Rule()
#: The shipped gate (``SLM_HOOK_MIN_RELEVANCE`` overrides it).
DEFAULT_MINIMUM = DEFAULT_RULE.gate


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
    rule: Rule = DEFAULT_RULE,
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
    texts = [" ".join(r.memory.content.split()) for r in others]
    candidates = [
        (r.id, round(r.relevance_score, 4), len(text))
        for r, text in zip(others, texts, strict=True)
    ]
    extra = {"candidates": candidates}
    chosen = rule.select(candidates)
    if not chosen:
        detail = f"best {best:.2f} < {rule.gate:.2f}" if best is not None else "none of others"
        return Injection("", BELOW_MINIMUM, detail=detail, best=best, extra=extra)
    lines, shown = [PROMPT_HEAD], []
    for index, room in chosen:
        found = others[index]
        text = excerpt(texts[index], query, room)
        lines.append(_label(found.memory, found.relevance_score) + text)
        shown.append((found.id, round(found.relevance_score, 4)))
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


def _label(record: MemoryRecord, relevance: float | None) -> str:
    when = (record.event_time or record.recorded_at).date().isoformat()
    score = "" if relevance is None else f" | relevance {relevance:.2f}"
    return f"- [{when}{score} | id {record.id}] "


def _lines(
    items: list[tuple[MemoryRecord, float | None]], budget: int, head: str
) -> tuple[list[str], list[tuple[str, float | None]]]:
    labels = [_label(record, relevance) for record, relevance in items]
    texts = [" ".join(record.content.split()) for record, _ in items]
    rooms = fit([(len(a), len(b)) for a, b in zip(labels, texts, strict=True)], budget, len(head))
    lines = [head] + [labels[i] + _cut(texts[i], room) for i, room in enumerate(rooms)]
    shown = [
        (record.id, None if relevance is None else round(relevance, 4))
        for record, relevance in items[: len(rooms)]
    ]
    return lines, shown


def fit(sizes: Sequence[tuple[int, int]], budget: int, head: int) -> list[int]:
    """How many characters of each item's text a block shows, for items of (label, text)
    sizes in rank order after a head line of ``head`` characters, within ``budget``
    characters (lines joined by newlines).

    The most items that fit are kept, each needing its whole text or :data:`EXCERPT_MIN`
    characters of it, whichever is less (the lowest ranked are left out first); the room
    left is then shared so that a short text is shown whole and the long ones share the
    rest equally (each cut to an excerpt of its share)."""
    count = len(sizes)
    while count:
        fixed = head + sum(label + 1 for label, _ in sizes[:count])
        if fixed + sum(min(text, EXCERPT_MIN) for _, text in sizes[:count]) <= budget:
            break
        count -= 1
    if not count:
        return []
    room = budget - head - sum(label + 1 for label, _ in sizes[:count])
    rooms = [0] * count
    waiting = sorted(range(count), key=lambda i: sizes[i][1])
    while waiting:
        share = room // len(waiting)
        index = waiting[0]
        if sizes[index][1] <= share:
            rooms[index] = sizes[index][1]
            room -= sizes[index][1]
            waiting.pop(0)
            continue
        for index in waiting:
            rooms[index] = share
        break
    return rooms


def prompt_label(relevance: float, memory_id: str) -> int:
    """The size of a prompt block's label of a memory (what :func:`fit` is given)."""
    return len(f"- [2000-01-01 | relevance {relevance:.2f} | id {memory_id}] ")


_WORD = re.compile(r"\w+")
#: Words too common to say which part of a memory a prompt is about.
_COMMON = frozenset(
    "the a an and or of to in on at for with is are was were be been it its this that what "
    "which who whom when where why how did do does i you we they he she my your our their "
    "me us them his her from by as about into than then so not no yes can could would should "
    "will have has had any some there here".split()
)


def excerpt(text: str, prompt: str, room: int) -> str:
    """``text`` whole when it fits in ``room`` characters, else the ``room`` characters of it
    around the part that holds the most of the prompt's words (marked ``...`` where cut)."""
    if len(text) <= room:
        return text
    words = {w for w in _WORD.findall(prompt.lower()) if w not in _COMMON and len(w) > 2}
    hits = [m.start() for m in _WORD.finditer(text) if m.group().lower() in words]
    width = max(0, room - 6)
    best_start, best_count = 0, -1
    for begin in [0, *hits]:
        start = max(0, min(begin - width // 4, len(text) - width))
        count = sum(1 for h in hits if start <= h < start + width)
        if count > best_count:
            best_start, best_count = start, count
    start = best_start
    if start:  # begin at a word
        space = text.find(" ", start, start + 20)
        start = space + 1 if space != -1 else start
    piece = text[start : start + width].rstrip()
    if start + width < len(text):
        cut = piece.rfind(" ")
        piece = (piece[:cut] if cut > width // 2 else piece) + "..."
    return ("..." if start else "") + piece


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 3)].rstrip() + "..."
