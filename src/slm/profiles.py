"""Profiles as a user sees them: which exist in a store, how many memories each holds and
when each was last written; a profile that holds nothing, named for reading, is most likely
a typo; deleting a whole profile.

A profile exists while it holds at least one memory: writing to a new name creates it, and
forgetting its last memory (or deleting it) ends it. Every surface reads profiles through
here (``slm profiles``, ``GET /v1/profiles``, the MCP ``profiles`` tool, the page's profile
list), and every reading command refuses a profile that does not exist when others do
(:func:`require`), naming those, instead of answering "nothing stored" for a typo.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from slm.engine import Memory
from slm.errors import NotFound
from slm.models import from_micros, iso

#: How many memories one step of :func:`delete` forgets.
DELETE_BATCH = 1000


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    memories: int
    last_write: datetime | None

    def to_dict(self) -> dict[str, Any]:
        written = iso(self.last_write) if self.last_write else None
        return {"name": self.name, "memories": self.memories, "last_write": written}


def profiles(memory: Memory) -> list[Profile]:
    """Every profile of ``memory``'s store that holds memories, by name."""
    return [
        Profile(name, count, from_micros(newest))
        for name, count, newest in memory.store.profile_summaries()
    ]


def require(memory: Memory) -> None:
    """Refuse to read ``memory``'s profile when it holds nothing but others do, naming
    them: a mistyped profile would otherwise answer "nothing stored" in silence. A store
    that holds nothing at all (a first run) is not refused."""
    if memory.list(1):
        return
    others = profiles(memory)
    if not others:
        return
    named = ", ".join(f"{p.name} ({p.memories})" for p in others)
    raise NotFound(
        f"no profile {memory.profile!r} in {memory.location}: it holds no memories "
        f"(profiles there: {named}); storing a memory in it creates it"
    )


def delete(memory: Memory) -> int:
    """Delete ``memory``'s whole profile: forget every memory in it (versions included) and
    its feedback, recall log and learned ranker, as :meth:`Memory.forget` and
    :meth:`Memory.reset_feedback` do. Returns how many memories were forgotten; other
    profiles are untouched."""
    require(memory)
    forgotten = 0
    while batch := memory.list(DELETE_BATCH):
        forgotten += len(memory.forget([r.id for r in batch], missing_ok=True))
    memory.reset_feedback()
    return forgotten
