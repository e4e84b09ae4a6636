"""What the pages show, computed from library objects: a result's channel contributions
and evidence, shortened text, times, and the page's own addresses. No HTML here: the
templates render these values, escaped."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from slm.contract import RecallResponse
from slm.learn.reading import describe
from slm.models import MemoryRecord

#: How much of a memory a list shows; the memory's page shows all of it.
LIST_CHARS = 600
#: Memories per page of the timeline.
PAGE_SIZE = 25


@dataclass(frozen=True, slots=True)
class Shown:
    """A memory's text as a list shows it: at most ``LIST_CHARS`` characters."""

    text: str
    hidden: int

    @classmethod
    def of(cls, content: str, limit: int = LIST_CHARS) -> Shown:
        if len(content) <= limit:
            return cls(content, 0)
        return cls(content[:limit].rstrip() + "…", len(content) - limit)


#: The store's kinds of link between memories, in words.
LINKS = {"prev": "the turn before", "next": "the turn after", "similar": "similar meaning"}


def link_words(kinds: tuple[str, ...]) -> str:
    return ", ".join(LINKS.get(kind, kind) for kind in kinds)


def when(moment: datetime | None) -> str:
    return "" if moment is None else f"{moment:%Y-%m-%d %H:%M} UTC"


def address(path: str, profile: str, default: str, **params: Any) -> str:
    """``path`` with ``params`` (empty ones left out) and the profile when it is not the
    server's default: every link keeps the profile chosen."""
    query = {k: v for k, v in params.items() if v not in (None, "", [], ())}
    if profile != default:
        query = {"profile": profile, **query}
    return path + ("?" + urlencode(query, doseq=True) if query else "")


def results(response: RecallResponse) -> list[dict[str, Any]]:
    """Each result with its memory, shortened text, scores, and from the trace: the
    channels that found it with their rank, raw score and share of the fused score, and
    the evidence that admitted it."""
    trace: Mapping[str, Any] = response.trace or {}
    details = {d["id"]: d for d in trace.get("results", [])}
    out = []
    for result in response.results:
        traced = details.get(result.memory.id, {}).get("channels", {})
        channels = [
            {
                "name": name,
                "rank": c.rank,
                "score": c.score,
                "part": traced.get(name, {}).get("part", 0.0),
                "share": traced.get(name, {}).get("share", 0.0),
            }
            for name, c in result.channels.items()
        ]
        channels.sort(key=lambda channel: -channel["part"])
        detail = details.get(result.memory.id, {})
        out.append(
            {
                "result": result,
                "memory": result.memory,
                "shown": Shown.of(result.memory.content),
                "channels": channels,
                "evidence": detail,
                "read": describe(detail["features"]) if detail.get("features") else None,
            }
        )
    return out


#: The owner keys a card names, and the word it names each by.
OWNER_WORDS = {"user_id": "user", "agent_id": "agent", "run_id": "run"}


def owner(record: MemoryRecord) -> list[str]:
    """Whose memory it is, as a card shows it: ``["user alice", "agent helper"]``."""
    held = record.metadata
    return [f"{word} {held[key]}" for key, word in OWNER_WORDS.items() if held.get(key) is not None]


def metadata(record: MemoryRecord) -> str:
    return json.dumps(dict(record.metadata), indent=2, ensure_ascii=False, sort_keys=True)


def tags_of(text: str) -> list[str]:
    """Tags typed as a comma-separated list."""
    return [tag.strip() for tag in text.split(",") if tag.strip()]
