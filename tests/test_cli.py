"""The slm command: JSON output, human output, errors without tracebacks."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from slm.cli import cli


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SLM_EMBEDDER", "fake")
    monkeypatch.setenv("SLM_DB", str(tmp_path / "cli.db"))
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(cli, list(args), catch_exceptions=False)

    return invoke


def test_remember_recall_get_list_forget(run) -> None:  # type: ignore[no-untyped-def]
    made = run(
        "remember",
        "The boiler is serviced every October",
        "--source",
        "home",
        "--event-time",
        "2024-10-01T09:00:00Z",
        "--confidence",
        "0.9",
        "--meta",
        '{"room": "cellar"}',
        "--tag",
        "house",
        "--json",
    )
    assert made.exit_code == 0, made.output
    record = json.loads(made.stdout)
    assert record["content"] == "The boiler is serviced every October"
    assert record["metadata"] == {"room": "cellar"} and record["tags"] == ["house"]

    recalled = json.loads(run("recall", "boiler service", "--json").stdout)
    assert recalled["score_contract_version"] == "2"
    assert recalled["results"][0]["id"] == record["id"]

    assert json.loads(run("get", record["id"], "--json").stdout)["id"] == record["id"]
    listed = json.loads(run("list", "--limit", "5", "--json").stdout)["memories"]
    assert [r["id"] for r in listed] == [record["id"]]

    forgotten = run("forget", record["id"], "--json")
    assert json.loads(forgotten.stdout) == {"forgotten": [record["id"]], "not_found": []}
    assert json.loads(run("list", "--json").stdout) == {"memories": []}


def test_human_output(run) -> None:  # type: ignore[no-untyped-def]
    assert run("remember", "Kettle descaling needs citric acid").stdout.startswith("remembered ")
    again = run("remember", "Kettle descaling needs citric acid").stdout
    assert again.startswith("already stored as ")
    out = run("recall", "descaling the kettle").stdout
    assert " 1. Kettle descaling" in out and "relevance 0." in out and "ranking 0." in out


def test_recall_trace_json(run) -> None:  # type: ignore[no-untyped-def]
    run("remember", "Kettle descaling needs citric acid")
    body = json.loads(run("recall", "kettle", "--trace", "--json").stdout)
    assert set(body["trace"]["channels"]) >= {"semantic", "bm25"}


def test_import_export_round_trip(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source = tmp_path / "in.jsonl"
    source.write_text('{"content": "one"}\n{"content": "two", "tags": ["x"]}\n', encoding="utf-8")
    assert json.loads(run("import", str(source), "--json").stdout)["stored"] == 2
    again = json.loads(run("import", str(source), "--json").stdout)
    assert (again["stored"], again["existing"]) == (0, 2)
    dump = tmp_path / "out.jsonl"
    assert json.loads(run("export", str(dump), "--json").stdout)["exported"] == 2
    lines = [json.loads(line) for line in dump.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["content"] for r in lines) == ["one", "two"]


def test_health_json(run) -> None:  # type: ignore[no-untyped-def]
    run("remember", "something")
    report = json.loads(run("health", "--json").stdout)
    assert set(report) >= {"store", "embedder", "channels"}
    assert report["channels"]["semantic"] == {"healthy": True, "reason": None, "enabled": True}


def test_profiles_via_option_and_env(run, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    run("--profile", "work", "remember", "standup at nine")
    # Reading a profile that holds nothing, while another does, is most likely a typo.
    typo = run("list", "--json")
    assert typo.exit_code == 1 and "no profile 'default'" in typo.output
    assert "work (1)" in typo.output
    monkeypatch.setenv("SLM_PROFILE", "work")
    assert len(json.loads(run("list", "--json").stdout)["memories"]) == 1


def test_profiles_are_listed_counted_and_deleted_with_care(run) -> None:  # type: ignore[no-untyped-def]
    assert run("profiles").stdout.startswith("no profile holds memories")
    run("--profile", "work", "remember", "standup at nine")
    run("--profile", "work", "remember", "retro on fridays")
    run("--profile", "home", "remember", "bins go out on tuesday")
    listed = json.loads(run("profiles", "--json").stdout)["profiles"]
    assert [(p["name"], p["memories"]) for p in listed] == [("home", 1), ("work", 2)]
    assert all(p["last_write"].endswith("Z") for p in listed)
    human = run("profiles").stdout.splitlines()
    assert human[1].startswith("work") and "2 memories" in human[1]
    # Without --yes and without a terminal to ask on, nothing is deleted.
    refused = run("profiles", "delete", "work")
    assert refused.exit_code == 1 and "add --yes" in refused.output
    done = json.loads(run("profiles", "delete", "work", "--yes", "--json").stdout)
    assert done == {"deleted": {"profile": "work", "forgotten": 2}}
    left = json.loads(run("profiles", "--json").stdout)["profiles"]
    assert [p["name"] for p in left] == ["home"]
    gone = run("profiles", "delete", "work", "--yes")
    assert gone.exit_code == 1 and "no profile 'work'" in gone.output


def test_a_long_text_shows_progress_on_stderr(run) -> None:  # type: ignore[no-untyped-def]
    long = "The tide came in over the rocks at dawn. " * 2000  # 82,000 bytes
    done = run("remember", long)
    assert done.exit_code == 0
    assert done.stderr.startswith("slm: storing a text of 80 KiB")
    assert "slm: storing" not in run("remember", "short").stderr
    refused = run("remember", "x" * 600_000)
    assert refused.exit_code == 1 and "slm: storing" not in refused.stderr
    assert "store a longer text as several memories" in refused.stderr


BAD = [
    (["remember", ""], "content is empty"),
    (["remember", "   "], "content is empty"),
    (["remember", "x" * 530_000], "limit is 524288 bytes"),
    (["remember", "nul\x00"], "NUL"),
    (["remember", "ok", "--event-time", "not-a-date"], "event_time is not an ISO 8601"),
    (["remember", "ok", "--meta", "{broken"], "metadata is not valid JSON"),
    (["remember", "ok", "--confidence", "7"], "confidence must be in 0..1"),
    (["recall", "q", "--k", "0"], "k must be in 1..1000"),
    (["recall", "q", "--k", "1001"], "k must be in 1..1000"),
    (["recall", "q", "--channels", "psychic"], "unknown channel"),
    (["recall", "q", "--min-relevance", "1.5"], "min_relevance must be in 0..1, got 1.5"),
    (["recall", "q", "--min-relevance", "high"], "'high' is not a valid float"),
    (["--profile", "bad name!", "list"], "profile must match"),
    (["get", "0123456789abcdef"], "no memory with id"),
    (["get", "nope"], "memory id must be"),
    (["forget", "0123456789abcdef"], "not found"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_one_line_error(run, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    run("remember", "a first memory")
    run("forget", json.loads(run("list", "--json").stdout)["memories"][0]["id"])
    result = run(*args)
    assert result.exit_code != 0
    assert message in result.stderr
    assert "Traceback" not in result.output + result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert json.loads(run("list", "--json").stdout) == {"memories": []}


def test_real_process_has_no_traceback(tmp_path: Path) -> None:
    env = {"SLM_EMBEDDER": "fake", "SLM_DB": str(tmp_path / "p.db"), "PATH": ""}
    done = subprocess.run(
        [sys.executable, "-m", "slm", "remember", "ok", "--event-time", "garbage"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: event_time is not an ISO 8601 timestamp")
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_demo_runs_and_recalls(run) -> None:  # type: ignore[no-untyped-def]
    result = run("demo", "--json")
    assert result.exit_code == 0
    answers = json.loads(result.stdout)
    assert len(answers) >= 5
    assert all(a["score_contract_version"] == "2" for a in answers)


def test_the_demo_says_what_it_stored_and_what_to_ask_next(run) -> None:  # type: ignore[no-untyped-def]
    first = run("demo")
    assert first.exit_code == 0 and first.stdout.startswith("Stored 14 memories")
    command = first.stdout.strip().splitlines()[-1].strip()
    assert command.startswith("slm ") and "--profile demo recall" in command
    asked = run(*shlex.split(command)[1:])  # the command it prints works as printed
    assert asked.exit_code == 0, asked.output
    again = run("demo")
    assert again.stdout.startswith("Stored 0 new of 14 memories")


def test_every_command_is_documented_in_the_readme() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    for name in cli.commands:
        assert f"slm {name}" in readme, f"README does not mention 'slm {name}'"


def test_update_supersede_and_recall_what_holds(run) -> None:  # type: ignore[no-untyped-def]
    old = json.loads(
        run("remember", "I live in Berlin", "--event-time", "2022-01-01", "--json").stdout
    )
    made = run("update", old["id"], "I live in Lisbon now", "--event-time", "2024-03-01", "--json")
    assert made.exit_code == 0, made.output
    new = json.loads(made.stdout)
    assert new["created"] is True and new["valid_from"] == "2024-03-01T00:00:00Z"
    stale = json.loads(run("get", old["id"], "--json").stdout)
    assert stale["superseded_by"] == new["id"] and stale["valid_to"] == "2024-03-01T00:00:00Z"

    ids = [
        r["id"] for r in json.loads(run("recall", "where do I live", "--json").stdout)["results"]
    ]
    assert ids == [new["id"]]
    flagged = json.loads(run("recall", "where do I live", "--include-superseded", "--json").stdout)
    assert {r["id"]: r["superseded_by"] for r in flagged["results"]} == {
        new["id"]: None,
        old["id"]: new["id"],
    }
    then = json.loads(run("recall", "where do I live", "--as-of", "2023-01-01", "--json").stdout)
    assert [r["id"] for r in then["results"]] == [old["id"]]
    assert "superseded by" in run("recall", "Berlin", "--include-superseded").stdout

    third = run(
        "remember", "I live in Porto", "--supersedes", new["id"], "--event-time", "2025-01-01"
    )
    assert third.exit_code == 0 and third.stdout.startswith("remembered ")
    assert json.loads(run("get", new["id"], "--json").stdout)["valid_to"] == "2025-01-01T00:00:00Z"

    third_id = json.loads(run("get", new["id"], "--json").stdout)["superseded_by"]
    undone = run("unlink", new["id"], third_id)
    assert undone.exit_code == 0 and undone.stdout == f"{third_id} no longer replaces {new['id']}\n"
    assert json.loads(run("get", new["id"], "--json").stdout)["valid_to"] is None
    again = run("unlink", new["id"], third_id)
    assert again.exit_code == 1 and "no link to undo" in again.output


LIFECYCLE_BAD = [
    (["update", "0123456789abcdef", "new text"], "no memory with id"),
    (["update", "nope", "new text"], "memory id must be"),
    (["unlink", "0123456789abcdef", "0123456789abcdee"], "no memory with id"),
    (["unlink", "0123456789abcdef"], "Missing argument"),
    (["remember", "x", "--supersedes", "0123456789abcdef"], "no memory with id"),
    (["recall", "q", "--as-of", "yesterday-ish"], "as_of is not an ISO 8601"),
    (["recall", "q", "--as-of", "2024-01-01", "--include-superseded"], "as_of"),
]


@pytest.mark.parametrize(("args", "message"), LIFECYCLE_BAD)
def test_bad_lifecycle_input_stores_nothing(run, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    run("remember", "a first memory")
    before = run("list", "--json").stdout
    result = run(*args)
    assert result.exit_code != 0
    assert message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert run("list", "--json").stdout == before


def test_feedback_for_a_recall_listed_and_reset(run) -> None:  # type: ignore[no-untyped-def]
    made = json.loads(run("remember", "The boiler is serviced in May", "--json").stdout)
    recalled = json.loads(run("recall", "boiler service", "--json").stdout)
    told = run("feedback", made["id"], "--useful", "--query", recalled["query_id"], "--json")
    assert told.exit_code == 0, told.output
    assert json.loads(told.stdout)["query_id"] == recalled["query_id"]
    assert "source trust is now" in run("feedback", made["id"], "--not-useful").output
    listed = json.loads(run("feedback", "--list", "--json").stdout)["feedback"]
    assert [(e["useful"], e["query_id"]) for e in listed] == [
        (False, None),
        (True, recalled["query_id"]),
    ]
    assert made["id"] in run("feedback", "--list").output
    unknown = run("feedback", made["id"], "--useful", "--query", "b" * 32)
    assert unknown.exit_code == 1 and "no recall with query id" in unknown.output
    assert run("feedback", made["id"]).exit_code == 2  # --useful or --not-useful is needed
    assert run("feedback").exit_code == 2
    assert json.loads(run("feedback", "--reset", "--json").stdout) == {"forgotten": 2}
    assert json.loads(run("feedback", "--list", "--json").stdout) == {"feedback": []}


def test_a_server_sets_aside_what_it_loaded_before_serving(
    run,
    monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
) -> None:
    """What a server loaded before serving is out of the garbage collector's full passes
    (docs/scale.md, "Pauses")."""
    import gc

    import slm.server.rest

    frozen: list[int] = []
    monkeypatch.setattr(slm.server.rest, "serve", lambda **_: frozen.append(gc.get_freeze_count()))
    try:
        assert run("serve", "--port", "0").exit_code == 0
    finally:
        gc.unfreeze()
    assert frozen and frozen[0] > 1000


#: Stored text that would drive a terminal if printed raw: clear the screen, retitle the
#: window, recolour, return to the line start, ring the bell, an 8-bit CSI and DEL.
HOSTILE_CONTENT = "Maya likes tea\x1b[2J\x1b]0;owned\x07 and\r\nscones\x9b31m\x7f"
HOSTILE_SOURCE = "chat\x1b]0;title\x07\r\nsource fake"
HOSTILE_TAG = "\x1b[31mred"
HOSTILE_META = {"k\x1b[1m": "v\r\x9b2J", "n": ["\x07"]}


def controls(text: str) -> set[str]:
    """The control characters in ``text`` other than line feeds (C0, DEL, C1)."""
    return {c for c in text if (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0) and c != "\n"}


def test_human_output_shows_control_characters_escaped(run) -> None:  # type: ignore[no-untyped-def]
    """What is stored reaches a terminal as text, never as a command to it; --json stays
    exact, and what is stored is not altered."""
    made = run("remember", HOSTILE_CONTENT, "--source", HOSTILE_SOURCE, "--tag", HOSTILE_TAG,
               "--meta", json.dumps(HOSTILE_META), "--json")  # fmt: skip
    record = json.loads(made.stdout)
    assert record["content"] == HOSTILE_CONTENT.strip() and record["source"] == HOSTILE_SOURCE
    assert record["tags"] == [HOSTILE_TAG] and record["metadata"] == HOSTILE_META
    for args in (["list"], ["recall", "Maya tea"], ["get", record["id"]], ["trace", "Maya tea"]):
        shown = run(*args)
        assert shown.exit_code == 0, shown.output
        assert controls(shown.output) == set(), (args, shown.output)
        assert "\\x1b[2J" in shown.output and "\\x1b]0;" in shown.output, args
        assert "\\x9b" in shown.output and "\\x7f" in shown.output, args
    details = run("get", record["id"]).output
    assert "\\x1b[31mred" in details and "\\x1b]0;title\\x07\\r\\nsource fake" in details
    assert "\\u001b[1m" in details and "\\x9b2J" in details  # in the metadata's JSON
    stored = json.loads(run("get", record["id"], "--json").stdout)
    assert stored == {name: value for name, value in record.items() if name in stored}
    assert json.loads(run("list", "--json").stdout)["memories"] == [stored]


def test_an_error_line_shows_control_characters_escaped(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An error that repeats what it was given (here a field of an imported file) shows it
    escaped, on one line."""
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text(json.dumps({"content": "x", "\x1b]0;owned\x07\nerror: fake": 1}) + "\n")
    refused = run("import", str(hostile))
    assert refused.exit_code == 1 and controls(refused.output) == set(), refused.output
    assert "\\x1b]0;owned\\x07\\nerror: fake" in refused.output
    assert refused.output.count("\n") == 1


def test_k_has_a_short_form_wherever_it_is_an_option(run) -> None:  # type: ignore[no-untyped-def]
    run("remember", "The boiler is serviced every October")
    run("remember", "The boiler pressure should stay near 1.5 bar")
    short = run("recall", "boiler", "-k", "1", "--json")
    assert short.exit_code == 0, short.output
    assert len(json.loads(short.stdout)["results"]) == 1
    assert len(json.loads(run("trace", "boiler", "-k", "1", "--json").stdout)["results"]) == 1

    def commands(group: click.Group) -> list[click.Command]:
        found: list[click.Command] = []
        for name in group.list_commands(click.Context(group)):
            command = group.get_command(click.Context(group), name)
            if isinstance(command, click.Group):
                found += commands(command)
            elif command is not None:
                found.append(command)
        return found

    with_k = [p for c in commands(cli) for p in c.params if "--k" in getattr(p, "opts", [])]
    assert len(with_k) >= 4 and all("-k" in p.opts for p in with_k)


def test_one_memory_is_counted_in_the_singular(run) -> None:  # type: ignore[no-untyped-def]
    run("--profile", "home", "remember", "bins go out on tuesday")
    run("--profile", "work", "remember", "standup at nine")
    run("--profile", "work", "remember", "retro on fridays")
    home, work = run("profiles").stdout.splitlines()
    assert "       1 memory    last write" in home and "1 memories" not in home
    assert "       2 memories  last write" in work
    assert run("--profile", "home", "health").stdout.startswith("profile home: 1 memory\n")
    refused = run("profiles", "delete", "home")
    assert "forgets its 1 memory:" in refused.output
    done = run("profiles", "delete", "home", "--yes").stdout
    assert done == "deleted profile 'home': 1 memory forgotten\n"


def test_recall_leaves_out_what_is_below_a_minimum_relevance(run) -> None:  # type: ignore[no-untyped-def]
    run("remember", "The boiler is serviced every October")
    run("remember", "The boiler pressure should stay near 1.5 bar")
    every = json.loads(run("recall", "boiler service", "--json").stdout)
    assert every["results"] and not every["abstained"]
    low = run("recall", "boiler service", "--min-relevance", "0", "--json").stdout
    assert [r["id"] for r in json.loads(low)["results"]] == [r["id"] for r in every["results"]]
    top = max(r["relevance_score"] for r in every["results"])
    assert top < 1
    above = f"{(top + 1) / 2:.4f}"
    none = json.loads(run("recall", "boiler service", "--min-relevance", above, "--json").stdout)
    assert none["results"] == [] and none["abstained"] is True
    assert none["abstention_reason"] == "evidence_floor"
    said = run("recall", "boiler service", "--min-relevance", above)
    assert said.exit_code == 0
    assert f"with a relevance of at least {float(above):g}" in said.stdout
    traced = run("recall", "boiler service", "--min-relevance", above, "--trace").stdout
    assert f"at least {float(above):g}" in traced


def test_export_refuses_the_store_its_files_and_existing_files(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``slm export`` onto the store file once replaced it with JSON Lines, every other
    profile lost; an existing file was overwritten silently."""
    store = tmp_path / "cli.db"
    run("--profile", "other", "remember", "kept in another profile")
    run("remember", "one memory")
    (tmp_path / "cli.db.index").mkdir(exist_ok=True)
    for target in (store, Path(f"{store}-wal"), Path(f"{store}-shm")):
        for extra in ((), ("--force",)):
            refused = run("export", str(target), *extra)
            assert refused.exit_code == 1, (target, refused.output)
            assert refused.stderr.startswith("error: ") and refused.stderr.count("\n") == 1
    inside = run("export", str(tmp_path / "cli.db.index" / "x.jsonl"), "--force")
    assert inside.exit_code == 1 and "index folder" in inside.stderr
    assert json.loads(run("--profile", "other", "list", "--json").stdout)["memories"]

    existing = tmp_path / "notes.txt"
    existing.write_text("my notes\n", encoding="utf-8")
    refused = run("export", str(existing))
    assert refused.exit_code == 1 and "use --force" in refused.stderr
    assert existing.read_text(encoding="utf-8") == "my notes\n"
    assert run("export", str(existing), "--force").exit_code == 0
    assert "one memory" in existing.read_text(encoding="utf-8")
    assert "one memory" in run("export", "-").stdout


def slm_process(tmp_path: Path, *args: str, stdin: Any = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "SLM_EMBEDDER": "fake", "SLM_DB": str(tmp_path / "proc.db")}
    return subprocess.run(
        [sys.executable, "-m", "slm", *args],
        env=environ,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("shape", ["brackets", "deep metadata", "deep document"])
def test_import_of_deeply_nested_json_is_one_clear_error(tmp_path: Path, shape: str) -> None:
    """200,000 brackets, or metadata nested thousands deep, ended in ``internal error:
    RecursionError`` (exit 70); nesting is bounded before anything is parsed."""
    nested: Any = {"x": 1}
    for _ in range(3000):
        nested = {"a": nested}
    text = {
        "brackets": "[" * 200_000 + "\n",
        "deep metadata": '{"content": "hi", "metadata": '
        + '{"a": ' * 3000
        + "1"
        + "}" * 3001
        + "\n",
        "deep document": "[\n" * 200_000,
    }[shape]
    source = tmp_path / "deep.jsonl"
    source.write_text(text, encoding="utf-8")
    done = slm_process(tmp_path, "import", str(source))
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("error: ") and "nested more than" in done.stderr
    assert done.stderr.count("\n") == 1


def test_import_of_an_endless_line_is_refused_promptly(tmp_path: Path) -> None:
    """``slm import /dev/zero`` read one line until MemoryError or the OOM killer; a line
    is now read at most MAX_JSON_CHARS far, from a file or from standard input."""
    started = time.monotonic()
    done = slm_process(tmp_path, "import", "/dev/zero")
    assert done.returncode == 1 and done.stderr.startswith("error: line 1: longer than")
    with open("/dev/zero", "rb") as zeros:
        piped = slm_process(tmp_path, "import", "-", stdin=zeros)
    assert piped.returncode == 1 and "error: line 1: longer than" in piped.stderr
    assert time.monotonic() - started < 30
    assert slm_process(tmp_path, "list", "--where", "a=" + "[" * 100_000).returncode == 1


def test_users_by_name_forget_a_user_and_history(tmp_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    """Issue 61 on the command line: --user on remember, import, list, recall, trace and
    forget; whose memory a line is; forgetting a user counts, asks and goes whole; history."""
    for user in ("alice", "bob"):
        assert run("remember", "I prefer dark mode", "--user", user).stdout.startswith(
            "remembered "
        )
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "I live in Porto."}]))
    for user in ("alice", "bob"):
        imported = json.loads(run("import", str(chat), "--user", user, "--json").stdout)
        assert imported["stored"] == 1
    listed = run("list", "--user", "alice")
    assert listed.stdout.count("user alice") == 2 and "bob" not in listed.stdout
    mine = json.loads(run("list", "--user", "bob", "--json").stdout)["memories"]
    assert {m["metadata"]["user_id"] for m in mine} == {"bob"} and len(mine) == 2
    found = run("recall", "dark mode", "--user", "bob")
    assert "user bob" in found.stdout and "alice" not in found.stdout
    assert "(user bob) I prefer dark mode" in run("trace", "dark mode", "--user", "bob").stdout
    traced = json.loads(run("trace", "dark mode", "--user", "bob", "--json").stdout)
    assert {r["metadata"]["user_id"] for r in traced["results"]} == {"bob"}
    assert "trace" in traced
    # recall - reads the question from standard input
    asked = CliRunner().invoke(cli, ["recall", "-", "--user", "bob", "--json"], input="dark mode\n")
    assert json.loads(asked.stdout)["query"] == "dark mode"
    assert json.loads(asked.stdout)["results"][0]["metadata"]["user_id"] == "bob"

    counted = json.loads(run("forget", "--user", "alice", "--dry-run", "--json").stdout)
    assert counted["count"] == 2
    unasked = run("forget", "--user", "alice")  # standard input is no terminal: no question
    assert unasked.exit_code == 1 and "--yes" in unasked.stderr
    assert len(json.loads(run("list", "--json").stdout)["memories"]) == 4
    assert run("forget").exit_code != 0  # nothing named: nothing forgotten
    gone = run("forget", "--user", "alice", "--yes")
    assert gone.stdout.strip() == "forgot 2 memories"
    left = json.loads(run("list", "--json").stdout)["memories"]
    assert {m["metadata"]["user_id"] for m in left} == {"bob"}

    old = next(m for m in left if "dark" in m["content"])
    newer = json.loads(run("update", old["id"], "I prefer light mode", "--json").stdout)
    told = json.loads(run("history", old["id"], "--json").stdout)
    assert told["current"] == newer["id"]
    shown = run("history", old["id"]).stdout
    assert f"replaced by {newer['id']} (stated" in shown and "light mode" in shown


@pytest.mark.parametrize(
    ("typed", "ours"), [("search", "recall"), ("add", "remember"), ("delete", "forget")]
)
def test_other_tools_command_names_point_to_ours(run, typed: str, ours: str) -> None:  # type: ignore[no-untyped-def]
    result = run(typed, "x")
    assert result.exit_code == 2
    assert f"slm calls it '{ours}'" in result.stderr and len(result.stderr.splitlines()) == 1
