"""The hooks as Claude Code runs them (docs/hooks.md): ``slm-hook`` as a process with the
host's documented payloads on stdin, the warm process it starts, a real SQLite store and the
real model. Session 1 is captured from its transcript; session 2's prompt about it gets it
injected; an unrelated prompt, or another project's, gets nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hook_session import (
    hooks_dir,
    journal,
    line,
    payload,
    run_hook,
    stop_worker,
    wait_captures,
    write_transcript,
)

from slm import Memory
from slm.hosts.hooks.mask import MASK, mask


@pytest.fixture(autouse=True)
def warm_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SLM_HOOK_IDLE", "120")
    yield
    stop_worker()


def _project(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    (folder / ".git").mkdir(parents=True)
    (folder / "src").mkdir()
    return folder


SESSION_ONE = [
    line("user", "For the billing service we settled on PostgreSQL 16 with logical replication."),
    line(
        "assistant",
        [
            {"type": "thinking", "thinking": "private reasoning"},
            {"type": "text", "text": "Understood: billing runs on PostgreSQL 16, replicated."},
            {"type": "tool_use", "id": "t1", "name": "Edit", "input": {"file_path": "X/src/db.py"}},
            {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "pytest -x"}},
        ],
    ),
    line(
        "user",
        [{"type": "tool_result", "tool_use_id": "t2", "is_error": True, "content": "1 failed"}],
    ),
    line("user", "<command-name>/clear</command-name>"),
    line("assistant", "Not logged in", isApiErrorMessage=True),
]


def _session_one(tmp_path: Path, project: Path) -> Path:
    lines = [x.replace("X/src", f"{project}/src") for x in SESSION_ONE]
    return write_transcript(tmp_path / "one.jsonl", lines)


def test_a_session_is_captured_and_its_content_injected_in_the_next_only_when_it_answers(
    tmp_path: Path,
) -> None:
    db, project = tmp_path / "m.db", _project(tmp_path, "shop")
    transcript = _session_one(tmp_path, project)
    done = run_hook("Stop", payload("Stop", "one", project, transcript), db)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    (captured,) = wait_captures(1)
    assert (captured["turns"], captured["observations"]) == (2, 2)

    asked = payload("UserPromptSubmit", "two", project, tmp_path / "two.jsonl")
    answer = run_hook(
        "UserPromptSubmit", {**asked, "prompt": "Which database does billing use?"}, db
    )
    assert answer.returncode == 0
    context = json.loads(answer.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "UserPromptSubmit"
    assert "PostgreSQL 16" in context["additionalContext"]
    assert "| relevance 0." in context["additionalContext"]
    assert "private reasoning" not in context["additionalContext"]

    unrelated = run_hook("UserPromptSubmit", {**asked, "prompt": "How do I center a div?"}, db)
    assert (unrelated.returncode, unrelated.stdout) == (0, "")
    last = journal()[-1]
    assert last["why"] in ("abstained", "below minimum") and last["chars"] == 0

    other = _project(tmp_path, "blog")
    elsewhere = payload("UserPromptSubmit", "three", other, tmp_path / "three.jsonl")
    asked_there = run_hook(
        "UserPromptSubmit", {**elsewhere, "prompt": "Which database does billing use?"}, db
    )
    assert (asked_there.returncode, asked_there.stdout) == (0, "")

    start = run_hook("SessionStart", {**asked, "source": "startup"}, db)
    block = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Files changed in this session: src/db.py" in block
    assert "A command failed in this session: pytest -x -> 1 failed" in block


def test_capturing_twice_stores_nothing_twice_and_new_turns_are_read_from_where_it_ended(
    tmp_path: Path,
) -> None:
    db, project = tmp_path / "m.db", _project(tmp_path, "shop")
    transcript = _session_one(tmp_path, project)
    for times in (1, 2):
        run_hook("Stop", payload("Stop", "one", project, transcript), db)
        wait_captures(times)
    first, second = wait_captures(2)
    assert len(first["captured"]) == 4 and second["captured"] == [] and second["turns"] == 0
    write_transcript(transcript, [line("user", "Also keep nightly backups.")], append=True)
    run_hook("SessionEnd", payload("SessionEnd", "one", project, transcript, reason="exit"), db)
    third = wait_captures(3)[-1]
    assert (third["turns"], len(third["captured"])) == (1, 1)
    with Memory(db) as memory:
        stored = memory.list(limit=100)
        assert len(stored) == 5
        assert {m.metadata["project"] for m in stored} == {str(project)}
        assert {m.metadata["session"] for m in stored} == {"one"}
        roles = sorted(str(m.metadata.get("role")) for m in stored)
        assert roles == ["None", "None", "assistant", "user", "user"]


def test_hostile_transcript_loses_nothing_valid_stores_no_secret_and_never_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLM_EMBEDDER", "fake")  # what is stored does not depend on the model
    db, project = tmp_path / "m.db", _project(tmp_path, "shop")
    huge = "word " * 300_000
    lines = [
        line("user", "my key is sk-ant-api03-" + "x" * 40 + " and password=hunter2hunter2"),
        "{not json",
        "\x00\x01\x02 garbage",
        json.dumps([1, 2, 3]),
        line("user", "control\x00chars\x1b[31m here\u202e"),
        line("assistant", huge),
        *[line("user" if i % 2 else "assistant", f"turn number {i}") for i in range(10_000)],
    ]
    transcript = write_transcript(tmp_path / "t.jsonl", lines)
    with open(transcript, "a", encoding="utf-8") as out:
        out.write('{"type": "user", "message": {"role": "user", "content": "half a li')
    done = run_hook("Stop", payload("Stop", "s", project, transcript), db)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    (captured,) = wait_captures(1, seconds=300)
    assert captured["skipped"] == 3 and captured["masked"] == 2
    assert captured["turns"] == 10_003
    with Memory(db, settings=None) as memory:
        assert memory.count() == 10_003
        texts = [m.content for m in memory.list(limit=10_000, text="sk-ant")]
        assert texts == []
        (secret,) = memory.list(text="my key is")
        assert secret.content == f"user: my key is {MASK} and password={MASK}"
        (odd,) = memory.list(text="control")
        assert odd.content == "user: controlchars[31m here"
    asked = {**payload("UserPromptSubmit", "s2", project, transcript), "prompt": lines[0]}
    assert run_hook("UserPromptSubmit", asked, db).returncode == 0
    assert not any(b"hunter2" in p.read_bytes() for p in hooks_dir().rglob("*") if p.is_file())

    for bad in ("", "not json", "[1]", '{"cwd": 5}', "\x00" * 10):
        for event in ("UserPromptSubmit", "Stop", "SessionStart"):
            result = run_hook(event, bad, db)
            assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_unknown_host_or_event_exits_0_silently_with_one_log_line(tmp_path: Path) -> None:
    for args in (["nohost", "Stop"], ["claude-code", "PostToolUse"], ["claude-code"]):
        result = subprocess.run(
            [sys.executable, "-m", "slm.hosts.hooks.thin", *args],
            input="{}",
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    logged = (hooks_dir() / "hooks.log").read_text(encoding="utf-8").splitlines()
    assert len(logged) == 3 and "unknown host or event" in logged[0] and "usage" in logged[2]


def test_a_project_with_slm_ignore_is_neither_captured_nor_recalled(tmp_path: Path) -> None:
    db, project = tmp_path / "m.db", _project(tmp_path, "shop")
    (project / ".slm-ignore").touch()
    transcript = _session_one(tmp_path, project)
    assert run_hook("Stop", payload("Stop", "one", project, transcript), db).returncode == 0
    asked = {**payload("UserPromptSubmit", "two", project, transcript), "prompt": "billing db?"}
    assert run_hook("UserPromptSubmit", asked, db).stdout == ""
    assert not (hooks_dir() / "spool").exists() or not list((hooks_dir() / "spool").iterdir())
    assert not db.exists()


def test_the_warm_process_refuses_a_request_without_its_secret(tmp_path: Path) -> None:
    import http.client

    db, project = tmp_path / "m.db", _project(tmp_path, "shop")
    asked = {**payload("SessionStart", "one", project, tmp_path / "x"), "source": "startup"}
    assert run_hook("SessionStart", asked, db).returncode == 0
    address = hooks_dir() / "worker.json"
    assert address.stat().st_mode & 0o777 == 0o600
    port = json.loads(address.read_text())["port"]
    for secret in ({}, {"X-Slm-Secret": "guess"}):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/event", b"{}", secret)
        assert connection.getresponse().status == 403
        connection.close()


def test_masking_covers_common_secrets_and_leaves_ordinary_words() -> None:
    for text in (
        "AKIAABCDEFGHIJKLMNOP",
        "ghp_" + "a" * 36,
        "OPENAI_API_KEY=abcd1234efgh",
        "postgres://bob:s3cretpw@db/x",
        "Authorization: Bearer abcdefghijklmnop",
        '{"client_secret": "zzz999yyy"}',
        "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
    ):
        masked, count = mask(text)
        assert count >= 1 and MASK in masked, text
    for text in ("I changed the tokenizer settings", "the password field is required"):
        assert mask(text) == (text, 0)


def test_the_hook_imports_nothing_of_the_engine() -> None:
    code = (
        "import sys, slm.hosts.hooks.thin; "
        "print(sorted(m for m in sys.modules if m.startswith('slm.') and "
        "not m.startswith(('slm.hosts', 'slm.release'))))"
    )
    env = {**os.environ}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.strip() == "[]", done.stderr


def _claude() -> str | None:
    import shutil

    folder = os.environ.get("SLM_HOST_BIN_DIR", "/work/tools/node_modules/.bin")
    found = Path(folder) / "claude"
    if found.is_file() and os.access(found, os.X_OK):
        return str(found)
    return shutil.which("claude")


def test_the_real_claude_cli_runs_the_hooks_and_gets_the_memory_injected(tmp_path: Path) -> None:
    """``claude -p`` (not logged in) in a project whose ``.claude/settings.json`` holds the
    hooks in the documented format: SessionStart, UserPromptSubmit and SessionEnd run, the
    prompt about session 1 gets its memory injected (recorded in Claude Code's transcript as
    an attachment), an unrelated one gets nothing, and SessionEnd captures the prompts."""
    claude = _claude()
    if claude is None:
        if os.environ.get("SLM_REQUIRE_HOSTS") == "1":
            pytest.fail("the claude CLI is not installed (SLM_REQUIRE_HOSTS=1)")
        pytest.skip("the claude CLI is not installed")
    db, project = tmp_path / "m.db", _project(tmp_path, "shop")
    transcript = _session_one(tmp_path, project)
    run_hook("Stop", payload("Stop", "one", project, transcript), db)
    wait_captures(1)
    hook = tmp_path / "slm-hook"
    hook.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m slm.hosts.hooks.thin "$@"\n')
    hook.chmod(0o755)
    events = ("SessionStart", "UserPromptSubmit", "SessionEnd")

    def command(event: str) -> dict[str, object]:
        run = f"{hook} claude-code {event} --db {db}"
        return {"type": "command", "command": run, "timeout": 30}

    settings = {"hooks": {event: [{"hooks": [command(event)]}] for event in events}}
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps(settings))
    home = tmp_path / "home-claude"
    home.mkdir()
    injected = {}
    for prompt in ("Which database does the billing service run on?", "Write a haiku about tea"):
        subprocess.run(
            [claude, "-p", prompt],
            cwd=project,
            env={**os.environ, "HOME": str(home)},
            capture_output=True,
            timeout=120,
        )
        # <project path with / (and other characters but letters and digits) as ->
        written = (home / ".claude" / "projects").glob("*/*.jsonl")
        newest = max(written, key=lambda p: p.stat().st_mtime_ns)
        records = [json.loads(x) for x in newest.read_text().splitlines() if x.strip()]
        attached = [
            r["attachment"]
            for r in records
            if r.get("type") == "attachment"
            and r["attachment"].get("type") == "hook_additional_context"
            and r["attachment"].get("hookEvent") == "UserPromptSubmit"
        ]
        injected[prompt] = " ".join(" ".join(a["content"]) for a in attached)
    assert "PostgreSQL 16" in injected["Which database does the billing service run on?"]
    assert injected["Write a haiku about tea"] == ""
    ends = [e for e in wait_captures(3) if e["event"] == "SessionEnd"]
    assert [e["turns"] for e in ends] == [1, 1]


def test_the_page_shows_what_was_captured_and_injected_and_forgets_in_one_click(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re
    from contextlib import contextmanager

    import httpx
    from test_http import run_server

    monkeypatch.setenv("SLM_EMBEDDER", "fake")  # the server the page runs on uses it
    monkeypatch.setenv("SLM_HOME", str(tmp_path))  # and this data directory
    db, project = tmp_path / "api.db", _project(tmp_path, "shop")
    transcript = _session_one(tmp_path, project)
    run_hook("Stop", payload("Stop", "one", project, transcript), db)
    wait_captures(1)
    asked = payload("UserPromptSubmit", "two", project, tmp_path / "two.jsonl")
    for prompt in ("billing PostgreSQL 16 replication", "How do I center a div?"):
        run_hook("UserPromptSubmit", {**asked, "prompt": prompt}, db)
    injected = [e for e in journal() if e.get("why") == "injected"]
    assert injected and [e.get("why") for e in journal()][-1] != "injected", journal()
    forgotten = injected[0]["shown"][0][0]
    with contextmanager(run_server)(tmp_path) as url, httpx.Client(base_url=url) as client:
        page = client.get("/ui/hooks").text
        assert "billing PostgreSQL 16 replication" in page and "How do I center a div?" in page
        assert "nothing injected: abstained" in page or "nothing injected: below minimum" in page
        assert "Session <a" in page and "4 memories stored" in page and "2 turns read" in page
        assert f'/ui/memories/{forgotten}/forget"' in page
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        assert csrf is not None
        done = client.post(f"/ui/memories/{forgotten}/forget", data={"csrf": csrf.group(1)})
        assert done.status_code in (302, 303)
        again = client.get("/ui/hooks", params={"session": "two"}).text
        assert f"{forgotten}: forgotten" in again and "How do I center a div?" in again
        assert "Session <a" not in again


def test_gemini_cli_turns_are_captured_from_after_agent_and_recalled_before_the_agent(
    tmp_path: Path,
) -> None:
    """Gemini CLI's documented payloads: ``AfterAgent`` carries the turn (``prompt``,
    ``prompt_response``); ``BeforeAgent`` and ``SessionStart`` take
    ``hookSpecificOutput.additionalContext``."""
    db, project = tmp_path / "m.db", _project(tmp_path, "shop")
    gemini = [sys.executable, "-m", "slm.hosts.hooks.thin", "gemini-cli"]

    def hook(event: str, body: dict[str, object]) -> subprocess.CompletedProcess[str]:
        session = "g1" if event == "AfterAgent" else "g2"
        given = {"session_id": session, "transcript_path": str(tmp_path / "g.json"),
                 "cwd": str(project), "hook_event_name": event,
                 "timestamp": "2026-11-02T09:00:00Z", **body}  # fmt: skip
        return subprocess.run([*gemini, event, "--db", str(db)], input=json.dumps(given),
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    turn = {
        "prompt": "The staging cluster runs Kubernetes 1.31 in region eu-west-3.",
        "prompt_response": "Noted: staging is Kubernetes 1.31 in eu-west-3.",
        "stop_hook_active": False,
    }
    for _ in range(2):
        done = hook("AfterAgent", turn)
        assert (done.returncode, done.stdout) == (0, "")
    first, second = wait_captures(2)
    assert len(first["captured"]) == 2 and second["captured"] == []
    asked = hook("BeforeAgent", {"prompt": "Which Kubernetes version does staging run?"})
    context = json.loads(asked.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "BeforeAgent"
    assert "Kubernetes 1.31" in context["additionalContext"]
    for event in ("PreCompress", "AfterTool"):
        assert hook(event, {}).returncode == 0


def test_a_stale_address_file_sends_nothing_to_whoever_holds_the_port_now(tmp_path: Path) -> None:
    """A warm process that died leaves its file; its port may be another program's now.
    The hook posts nothing there (no payload, no secret) and starts a warm process."""
    import socket
    import threading

    db, project = tmp_path / "m.db", _project(tmp_path, "shop")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    received: list[bytes] = []

    def watch() -> None:
        for _ in range(150):
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            received.append(connection.recv(65536))
            connection.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    folder = hooks_dir()
    folder.mkdir(parents=True)
    port = listener.getsockname()[1]
    stale = {"port": port, "secret": "s" * 64, "pid": int(dead.stdout)}
    (folder / "worker.json").write_text(json.dumps(stale))
    (folder / "worker.json").chmod(0o600)
    asked = {**payload("SessionStart", "one", project, tmp_path / "x"), "source": "startup"}
    assert run_hook("SessionStart", asked, db).returncode == 0
    watcher.join()
    listener.close()
    assert received == []
    assert json.loads((folder / "worker.json").read_text())["port"] != port


def test_a_long_memory_is_injected_as_an_excerpt_around_what_the_prompt_asks(
    tmp_path: Path,
) -> None:
    from slm.hosts.hooks.inject import for_prompt

    project = str(tmp_path / "shop")
    filler = " ".join(
        f"Step {n}: we walked through the deployment checklist again." for n in range(40)
    )
    fact = "The billing service stores invoices in PostgreSQL 16 with logical replication."
    after = " ".join(f"Item {n} of the runbook was reviewed." for n in range(60))
    long_text = f"assistant: {filler} {fact} {after}"
    with Memory(tmp_path / "m.db") as memory:
        memory.remember(long_text, metadata={"project": project, "session": "one"})
        memory.remember(
            "user: Billing invoices must be kept for ten years.",
            metadata={"project": project, "session": "one"},
        )
        found = for_prompt(memory, "Where does billing store invoices?", project, "two")
    assert found.why == "injected", found
    assert len(found.block) <= 1500
    # the long memory is shown, cut around the part about billing invoices, not its start
    assert "PostgreSQL 16" in found.block and "Step 0:" not in found.block
    assert "ten years" in found.block and len(found.shown) == 2


def test_the_gate_decides_whether_and_the_floor_what_follows() -> None:
    from slm.hosts.hooks.inject import Rule

    rule = Rule(gate=0.6, floor=0.3, ratio=0.5, most=3)
    candidates = [("a", 0.7, 60), ("b", 0.4, 5000), ("c", 0.2, 40), ("d", 0.5, 80), ("e", 0.45, 9)]
    assert [i for i, _ in rule.select(candidates)] == [0, 1, 3]  # c below the floor; at most 3
    assert rule.select([("a", 0.59, 60), ("b", 0.58, 60)]) == []  # the top fails the gate
    rooms = dict(rule.select(candidates))
    assert rooms[0] == 60 and rooms[3] == 80 and 120 <= rooms[1] < 5000  # short lines whole
    with pytest.raises(ValueError, match="gate"):
        Rule(gate=1.5)


@pytest.mark.parametrize("xdg", [None, "", "  ", "/tmp/xdg-data"])
def test_the_thin_hooks_data_folder_is_slms_without_platformdirs(
    xdg: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """platformdirs reads ``XDG_DATA_HOME`` from the process's environment, so it is set
    there too; ``SLM_HOME`` is left out of the environment given."""
    from slm.hosts.hooks.place import data_folder
    from slm.settings import data_dir

    env = {k: v for k, v in os.environ.items() if k not in ("SLM_HOME", "XDG_DATA_HOME")}
    if xdg is not None:
        env["XDG_DATA_HOME"] = xdg
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    if xdg is not None:
        monkeypatch.setenv("XDG_DATA_HOME", xdg)
    assert data_folder(env) == str(data_dir(env))


def test_the_thin_hook_imports_no_pathlib_nor_platformdirs(tmp_path: Path) -> None:
    code = (
        "import sys; from slm.hosts.hooks.thin import main; "
        "print(sorted(m for m in ('pathlib', 'platformdirs', 'typing', 're') if m in sys.modules))"
    )
    env = {k: v for k, v in os.environ.items() if k != "SLM_HOME"}
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                          env={**env, "PYTHONPATH": os.pathsep.join(sys.path)})  # fmt: skip
    assert done.stdout.strip() == "['re']", done.stderr  # re: json's decoder


def test_codex_cli_prompts_are_recalled_and_their_turns_captured_at_stop(tmp_path: Path) -> None:
    """Codex CLI's documented payloads (hooks schema): UserPromptSubmit carries ``prompt``
    and ``turn_id`` and takes ``hookSpecificOutput.additionalContext``; Stop carries the
    reply only (``last_assistant_message``), so the turn stored is that prompt and reply."""
    db, project = tmp_path / "m.db", _project(tmp_path, "shop")
    codex = [sys.executable, "-m", "slm.hosts.hooks.thin", "codex-cli"]

    def hook(event: str, session: str, body: dict[str, object]) -> subprocess.CompletedProcess[str]:
        given = {"session_id": session, "transcript_path": None, "cwd": str(project),
                 "hook_event_name": event, "model": "gpt-5", "permission_mode": "default",
                 **body}  # fmt: skip
        return subprocess.run([*codex, event, "--db", str(db)], input=json.dumps(given),
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    said = "The staging cluster runs Kubernetes 1.31 in region eu-west-3."
    first = hook("UserPromptSubmit", "c1", {"turn_id": "t1", "prompt": said})
    assert (first.returncode, first.stdout) == (0, "")  # nothing stored yet
    reply = {"turn_id": "t1", "stop_hook_active": False,
             "last_assistant_message": "Noted: staging is Kubernetes 1.31."}  # fmt: skip
    assert hook("Stop", "c1", reply).returncode == 0
    (captured,) = wait_captures(1)
    assert captured["turns"] == 2 and len(captured["captured"]) == 2
    asked = hook("UserPromptSubmit", "c2", {"turn_id": "t9", "prompt": "Which Kubernetes version?"})
    context = json.loads(asked.stdout)["hookSpecificOutput"]
    assert context["hookEventName"] == "UserPromptSubmit"
    assert "Kubernetes 1.31 in region eu-west-3" in context["additionalContext"]
