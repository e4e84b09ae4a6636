"""Capture: a session's transcript, from where the last capture of the session ended, stored
as a conversation (:meth:`slm.Memory.remember_conversation`: one memory per message, roles
and times kept) under the project's scope and the session, with what the session did as
short observations beside it (:mod:`slm.hosts.hooks.claude_code`).

Where each session's capture ended (a byte offset in its transcript) is kept in a small
file per session (:mod:`slm.hosts.hooks.place`), written after the memories are stored:
running a capture twice stores nothing twice, and a capture that fails stores none of its
turns (the conversation is all or nothing) and leaves the offset where it was, so the next
one reads them again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slm.engine import Memory
from slm.hosts.hooks import claude_code
from slm.hosts.hooks.place import hooks_dir, session_key, write_private
from slm.hosts.hooks.project import PROJECT_KEY

#: The source of the observations a capture makes.
OBSERVER = "slm-hooks"
#: The most turns stored in one conversation write. A capture that fails after storing some
#: parts leaves the offset where it was; the next one reads them again and stores nothing
#: twice (the same text in the same scope is the memory already stored).
PART_TURNS = 2000


@dataclass(frozen=True, slots=True)
class Captured:
    """What a capture did: the ids of memories it created, how many turns and
    observations it read, lines skipped, secrets masked, and the new offset."""

    created: tuple[str, ...]
    turns: int
    observations: int
    skipped: int
    masked: int
    offset: int


def capture(
    memory: Memory,
    payload: Mapping[str, Any],
    project: str,
    *,
    host: str,
    db: str | None,
    env: Mapping[str, str] | None = None,
) -> Captured:
    """Store what ``payload``'s transcript holds after the session's last capture (for
    Gemini CLI and Codex CLI, the turn the payload holds)."""
    session = str(payload.get("session_id") or "")
    scope = {PROJECT_KEY: project, "host": host}
    if host in ("gemini-cli", "codex-cli"):
        return _store(memory, said_turn(payload), session, scope)
    transcript = payload.get("transcript_path")
    if not session or not isinstance(transcript, str) or not Path(transcript).is_file():
        return Captured((), 0, 0, 0, 0, 0)
    mark = hooks_dir(env) / "sessions" / f"{session_key(db, memory.profile, session)}.json"
    mark.parent.mkdir(exist_ok=True, mode=0o700)
    state = _state(mark)
    offset = int(state.get("offset", 0)) if state.get("transcript") == transcript else 0
    reading = claude_code.read(transcript, offset, project)
    done = _store(memory, reading, session, scope)
    skipped = int(state.get("skipped", 0)) + reading.skipped
    record = {"transcript": transcript, "offset": reading.end, "skipped": skipped}
    write_private(mark, json.dumps(record))
    return done


def said_turn(payload: Mapping[str, Any]) -> claude_code.Reading:
    """The turn a Gemini CLI ``AfterAgent`` payload holds (``prompt`` and
    ``prompt_response``; for Codex CLI's ``Stop``, the warm process puts them there: the
    turn's prompt and ``last_assistant_message``), cleaned and masked as a transcript's
    text is."""
    reading = claude_code.Reading()
    when = payload.get("timestamp")
    for role, key in (("user", "prompt"), ("assistant", "prompt_response")):
        text = payload.get(key)
        if isinstance(text, str):
            clean, hidden = claude_code.clean(text)
            reading.masked += hidden
            if clean:
                reading.turns.append(
                    claude_code.Turn(role, clean, when if isinstance(when, str) else None)
                )
    return reading


def _store(
    memory: Memory, reading: claude_code.Reading, session: str, scope: dict[str, Any]
) -> Captured:
    """Store ``reading``'s turns as a conversation, its observations beside it."""
    created: list[str] = []
    turns = reading.turns
    for start in range(0, len(turns), PART_TURNS):
        messages = [
            {"role": t.role, "content": t.text, **({"time": t.time} if t.time else {})}
            for t in turns[start : start + PART_TURNS]
        ]
        done = memory.remember_conversation(
            {"messages": messages}, session=session or None, metadata=scope
        )
        created += [r.id for r in done.memories if r.created]
    if reading.observations:
        meta = {**scope, "session": session, "kind": "observation"}
        when = next((t.time for t in reversed(turns) if t.time), None)
        observed = memory.remember_many(
            [
                {"content": o, "source": OBSERVER, "metadata": meta, "event_time": when}
                for o in reading.observations
            ]
        )
        created += [r.id for r in observed if r.created]
    return Captured(
        tuple(created),
        len(turns),
        len(reading.observations),
        reading.skipped,
        reading.masked,
        reading.end,
    )


def _state(mark: Path) -> dict[str, Any]:
    try:
        state = json.loads(mark.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}
