"""What the hooks page (``/ui/hooks``) shows, from the hooks' journal of the page's store
and profile (:mod:`slm.hosts.hooks.journal`): per session, what each capture stored; per
prompt, what was injected and with what relevance, or why nothing was (recall abstained,
nothing above the minimum). Memories forgotten since are shown as such."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slm.engine import Memory
from slm.hosts.hooks import journal
from slm.models import MemoryRecord
from slm.server.web.views import Shown

#: The most journal lines the page reads.
LINES = 1000
#: The most prompts and sessions it shows.
SHOWN = 100


@dataclass
class Captured:
    session: str
    project: str
    last: str
    turns: int = 0
    skipped: int = 0
    masked: int = 0
    memories: list[tuple[str, MemoryRecord | None, Shown | None]] = field(default_factory=list)


@dataclass
class Prompt:
    time: str
    session: str
    project: str
    event: str
    prompt: str
    why: str
    detail: str
    chars: int
    ms: float | None
    memories: list[tuple[str, float | None, MemoryRecord | None, Shown | None]]


def hooks_view(memory: Memory, session: str = "") -> dict[str, Any]:
    """The sessions captured and the prompts answered, newest first (of ``session`` only
    when given)."""
    entries = journal.entries(journal.path(memory.location, memory.profile), LINES)
    if session:
        entries = [e for e in entries if e.get("session") == session]
    wanted = {str(i) for e in entries for i in e.get("captured", [])}
    wanted |= {str(s[0]) for e in entries for s in e.get("shown", []) if s}
    records = {r.id: r for r in memory.get_many(sorted(wanted))} if wanted else {}

    def known(memory_id: str) -> tuple[MemoryRecord | None, Shown | None]:
        record = records.get(memory_id)
        return record, (Shown.of(record.content) if record is not None else None)

    sessions: dict[str, Captured] = {}
    prompts: list[Prompt] = []
    for entry in entries:
        name = str(entry.get("session") or "")
        if "captured" in entry:
            found = sessions.setdefault(
                name, Captured(name, str(entry.get("project", "")), str(entry.get("time", "")))
            )
            found.turns += int(entry.get("turns") or 0)
            found.skipped += int(entry.get("skipped") or 0)
            found.masked += int(entry.get("masked") or 0)
            found.memories += [(str(i), *known(str(i))) for i in entry["captured"]]
        elif "why" in entry and len(prompts) < SHOWN:
            shown = [(str(s[0]), s[1], *known(str(s[0]))) for s in entry.get("shown", []) if s]
            prompts.append(
                Prompt(
                    str(entry.get("time", "")),
                    name,
                    str(entry.get("project", "")),
                    str(entry.get("event", "")),
                    str(entry.get("prompt", "")),
                    str(entry.get("why", "")),
                    str(entry.get("detail") or ""),
                    int(entry.get("chars") or 0),
                    entry.get("ms"),
                    shown,
                )
            )
    return {"sessions": list(sessions.values())[:SHOWN], "prompts": prompts, "session": session}
