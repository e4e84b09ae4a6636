"""Claude Code's session transcript (JSONL, one record a line) read into what a capture
stores: the user's and the assistant's words, in order, and what the session did.

Kept: ``user`` records' text (typed prompts) and ``assistant`` records' text parts. Left
out: tool output (``tool_result`` parts), thinking, Claude Code's own records (attachments,
hook output, queue and cost records, command and ``<system-reminder>`` text, meta and
compact-summary records), sub-agent records (``isSidechain``), and replies Claude Code made
up itself (model ``<synthetic>``, API errors). What the session did becomes short
observations by rule: the files an ``Edit``/``Write``/``MultiEdit``/``NotebookEdit`` tool
call changed, and each ``Bash`` command whose result was an error.

Reading starts at a byte offset and ends after the last complete line, so that the next
capture starts where this one ended and a line being written is read whole next time. A
line that is not a JSON object is skipped and counted; nothing after it is lost. Text is
cleaned of control characters and its secrets masked (:mod:`slm.hosts.hooks.mask`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slm.hosts.hooks.mask import mask

#: The longest text kept of one message (a memory holds at most 512 KiB); the rest is cut.
MAX_TEXT_CHARS = 100_000
#: How many failed commands one capture makes observations of.
MAX_FAILURES = 5
_EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
_HOST_TEXT = ("<command-", "<local-command", "<system-reminder>", "<bash-", "<user-prompt-")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True, slots=True)
class Turn:
    role: str
    text: str
    time: str | None


@dataclass(slots=True)
class Reading:
    """What a transcript held after ``offset``: the turns, the observations, where the
    read ended (the next capture's offset), and how many lines were skipped."""

    turns: list[Turn] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    end: int = 0
    lines: int = 0
    skipped: int = 0
    masked: int = 0


def read(path: str | Path, offset: int = 0, project: str | None = None) -> Reading:
    """The transcript at ``path`` from byte ``offset`` to its last complete line."""
    with open(path, "rb") as stream:
        size = stream.seek(0, 2)
        offset = offset if 0 <= offset <= size else 0  # a transcript rewritten: read it all
        stream.seek(offset)
        data = stream.read()
    whole = data.rfind(b"\n") + 1
    reading = Reading(end=offset + whole)
    changed: dict[str, None] = {}
    commands: dict[str, str] = {}
    failures: list[str] = []
    for raw in data[:whole].split(b"\n"):
        if not raw.strip():
            continue
        reading.lines += 1
        try:
            record = json.loads(raw.decode("utf-8", errors="replace"))
        except ValueError:
            reading.skipped += 1
            continue
        if not isinstance(record, dict):
            reading.skipped += 1
            continue
        try:
            for role, text in _said(record, changed, commands, failures):
                kept, hidden = clean(text)
                reading.masked += hidden
                if kept:
                    time = record.get("timestamp")
                    reading.turns.append(Turn(role, kept, time if isinstance(time, str) else None))
        except (TypeError, AttributeError, KeyError):
            reading.skipped += 1
    reading.observations = _observations(changed, failures, project)
    return reading


def _said(
    record: Mapping[str, Any],
    changed: dict[str, None],
    commands: dict[str, str],
    failures: list[str],
) -> Iterator[tuple[str, str]]:
    """(role, text) of what ``record`` says, noting tool calls and failed commands."""
    kind, message = record.get("type"), record.get("message")
    if kind not in ("user", "assistant") or not isinstance(message, Mapping):
        return
    if record.get("isSidechain") or record.get("isMeta") or record.get("isCompactSummary"):
        return
    if kind == "assistant" and (
        message.get("model") == "<synthetic>" or record.get("isApiErrorMessage")
    ):
        return
    content = message.get("content")
    if isinstance(content, str):
        if kind == "user" and content.lstrip().startswith(_HOST_TEXT):
            return
        yield kind, content
        return
    if not isinstance(content, list):
        return
    for part in content:
        if not isinstance(part, Mapping):
            continue
        sort = part.get("type")
        if sort == "text" and isinstance(part.get("text"), str):
            text = part["text"]
            if not (kind == "user" and text.lstrip().startswith(_HOST_TEXT)):
                yield kind, text
        elif sort == "tool_use":
            _tool_call(part, changed, commands)
        elif sort == "tool_result" and part.get("is_error"):
            command = commands.get(str(part.get("tool_use_id")))
            if command is not None:
                failures.append(f"{command} -> {_first_line(part.get('content'))}")


def _tool_call(part: Mapping[str, Any], changed: dict[str, None], commands: dict[str, str]) -> None:
    name, given = part.get("name"), part.get("input")
    if not isinstance(given, Mapping):
        return
    if name in _EDIT_TOOLS:
        where = given.get("file_path") or given.get("notebook_path")
        if isinstance(where, str) and where:
            changed[where] = None
    elif name == "Bash" and isinstance(given.get("command"), str):
        commands[str(part.get("id"))] = given["command"]


def _first_line(content: object) -> str:
    if isinstance(content, list):
        content = " ".join(
            p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    text = content if isinstance(content, str) else ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return _short(lines[-1] if lines else "an error", 160)


def _observations(changed: dict[str, None], failures: list[str], project: str | None) -> list[str]:
    out = []
    if changed:
        names = [_relative(path, project) for path in changed]
        out.append("Files changed in this session: " + ", ".join(names[:20]))
    for failure in failures[:MAX_FAILURES]:
        out.append("A command failed in this session: " + _short(failure, 300))
    return [clean(text)[0] for text in out]


def _relative(path: str, project: str | None) -> str:
    if project and path.startswith(project.rstrip("/") + "/"):
        return path[len(project.rstrip("/")) + 1 :]
    return path


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clean(text: str) -> tuple[str, int]:
    """``text`` without control characters, its secrets masked, at most
    :data:`MAX_TEXT_CHARS` long."""
    text = _CONTROL.sub("", text.encode("utf-8", errors="replace").decode("utf-8")).strip()
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS].rstrip() + " [...]"
    return mask(text)
