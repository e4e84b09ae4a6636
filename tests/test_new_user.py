"""Issue 63's new user, end to end: a throwaway HOME and project, the real ``slm setup
claude-code --scope project`` (the venv's ``slm``), then the real ``claude -p`` (not logged
in, it still runs the project's SessionStart, UserPromptSubmit and SessionEnd hooks, with no
trust step in print mode). Session 1 says something and is captured (Stop needs a model
reply, so its reply line is written in Claude Code's layout and the Stop hook run as setup
wrote it); session 2's prompt about it gets it injected (an ``attachment`` in session 2's
transcript); an unrelated prompt gets nothing; ``slm setup --remove`` restores the project's
settings byte for byte. Skipped without the claude CLI unless ``SLM_REQUIRE_HOSTS=1``."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hook_session import line, stop_worker, wait_captures

BIN = Path(sys.executable).parent
#: A project's settings as a user left them (odd spacing kept: restored byte for byte).
EXISTING = '{\n  "permissions": {"allow": ["Bash(npm test)"]},\n\n  "model":   "opus"\n}\n'


def _claude() -> str | None:
    folder = os.environ.get("SLM_HOST_BIN_DIR", "/work/tools/node_modules/.bin")
    found = Path(folder) / "claude"
    return str(found) if found.is_file() and os.access(found, os.X_OK) else None


@pytest.fixture
def claude() -> str:
    found = _claude()
    if found is None:
        if os.environ.get("SLM_REQUIRE_HOSTS") == "1":
            pytest.fail("the claude CLI is not installed (SLM_REQUIRE_HOSTS=1)")
        pytest.skip("the claude CLI is not installed")
    if not (BIN / "slm").exists() or not (BIN / "slm-hook").exists():
        pytest.skip("slm and slm-hook are not installed beside this Python")
    return found


def _slm(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The venv's ``slm`` command, as a user runs it in the project."""
    command = [str(BIN / "slm"), *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _transcripts(home: Path) -> dict[str, list[dict[str, Any]]]:
    """Every Claude Code session transcript under ``home``, by session id."""
    out = {}
    for path in (home / ".claude" / "projects").glob("*/*.jsonl"):
        out[path.stem] = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return out


def _injected(records: list[dict[str, Any]]) -> str:
    found = [
        " ".join(r["attachment"]["content"])
        for r in records
        if r.get("type") == "attachment"
        and r["attachment"].get("hookEvent") == "UserPromptSubmit"
        and r["attachment"].get("type") == "hook_additional_context"
    ]
    return " ".join(found)


def test_a_new_user_sets_up_claude_code_and_the_next_session_recalls_the_first(
    claude: str, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "shop"
    home.mkdir()
    (project / ".git").mkdir(parents=True)
    (project / ".claude").mkdir()
    settings = project / ".claude" / "settings.json"
    settings.write_text(EXISTING)
    env = {**os.environ, "HOME": str(home), "SLM_HOOK_IDLE": "120"}
    try:
        done = _slm(["setup", "claude-code", "--scope", "project"], project, env)
        assert done.returncode == 0, done.stderr
        written = json.loads(settings.read_text())
        assert written["model"] == "opus" and set(written["hooks"]) >= {"Stop", "SessionEnd"}

        def ask(prompt: str) -> str:
            before = set(_transcripts(home))
            subprocess.run([claude, "-p", prompt], cwd=project, env=env,
                           capture_output=True, timeout=180)  # fmt: skip
            (session,) = set(_transcripts(home)) - before
            return session

        one = ask("For the billing service we settled on PostgreSQL 16 with logical replication.")
        # Stop needs a model reply: the reply in Claude Code's layout, and the Stop hook as
        # setup wrote it, with the payload Claude Code sends
        (path,) = (home / ".claude" / "projects").glob(f"*/{one}.jsonl")
        reply = line("assistant", [{"type": "text", "text": "Noted: billing is PostgreSQL 16."}])
        with open(path, "a", encoding="utf-8") as out:
            out.write(reply + "\n")
        (group,) = [g for g in written["hooks"]["Stop"] if "slm-hook" in str(g)]
        command = shlex.split(group["hooks"][0]["command"])
        stop = {"session_id": one, "transcript_path": str(path), "cwd": str(project),
                "hook_event_name": "Stop", "stop_hook_active": False}  # fmt: skip
        hooked = subprocess.run(command, input=json.dumps(stop), env=env, cwd=project,
                                capture_output=True, text=True, timeout=60)  # fmt: skip
        assert (hooked.returncode, hooked.stdout) == (0, "")
        captures = wait_captures(2)
        assert sum(c["turns"] for c in captures if c["session"] == one) == 2, captures

        two = ask("Which database does the billing service run on?")
        assert "PostgreSQL 16" in _injected(_transcripts(home)[two])
        three = ask("Write a haiku about tea")
        assert _injected(_transcripts(home)[three]) == ""
    finally:
        stop_worker()
    removed = _slm(["setup", "--remove", "claude-code"], project, env)
    assert removed.returncode == 0, removed.stderr
    assert settings.read_bytes() == EXISTING.encode()
