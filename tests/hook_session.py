"""Helpers for driving the hooks as a host does: Claude Code's transcript lines, the hook run
as a process with the payload on stdin, and the warm process it starts (stopped by id)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HOOK = [sys.executable, "-m", "slm.hosts.hooks.thin", "claude-code"]


def line(role: str, content: Any, when: str = "2026-11-02T09:00:00Z", **extra: Any) -> str:
    """One transcript line in Claude Code's layout."""
    record = {
        "parentUuid": None,
        "isSidechain": False,
        "type": role,
        "message": {"role": role, "content": content},
        "uuid": str(uuid.uuid4()),
        "timestamp": when,
        "sessionId": "s",
        **extra,
    }
    if role == "assistant":
        record["message"]["model"] = "claude-opus"
    return json.dumps(record)


def write_transcript(path: Path, lines: list[str], append: bool = False) -> Path:
    with open(path, "a" if append else "w", encoding="utf-8") as out:
        out.write("".join(x + "\n" for x in lines))
    return path


def run_hook(
    event: str, payload: dict[str, Any] | str, db: Path, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        [*HOOK, event, "--db", str(db), *args],
        input=data,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def payload(event: str, session: str, cwd: Path, transcript: Path, **extra: Any) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": str(cwd),
        "hook_event_name": event,
        **extra,
    }


def hooks_dir() -> Path:
    return Path(os.environ["SLM_HOME"]) / "hooks"


def journal() -> list[dict[str, Any]]:
    found = list(hooks_dir().glob("journal-*.jsonl"))
    out = []
    for path in found:
        out += [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    return sorted(out, key=lambda e: e["time"])


def wait_captures(count: int, seconds: float = 120) -> list[dict[str, Any]]:
    """The journal's capture entries once there are ``count`` and the spool is empty."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done = [e for e in journal() if "captured" in e]
        spool = list((hooks_dir() / "spool").glob("[0-9]*.json"))
        if len(done) >= count and not spool:
            return done
        time.sleep(0.1)
    raise AssertionError(f"{count} captures not done in {seconds} s: {journal()}")


def stop_worker() -> None:
    """Stop the warm process this test's hooks started, by its id."""
    where = hooks_dir() / "worker.json"
    try:
        pid = json.loads(where.read_text(encoding="utf-8"))["pid"]
    except (OSError, ValueError, KeyError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
