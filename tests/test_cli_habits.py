"""The command line as people type it: options after the command, standard input, one error
line, stores that are not created by mistake, output that says what it shows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from slm.cli import cli


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SLM_EMBEDDER", "fake")
    return tmp_path / "habits.db"


def slm(*args: str | Path, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, catch_exceptions=False)


def one_error_line(result: Result, code: int) -> str:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Usage:" not in result.output and "Traceback" not in result.output
    return lines[0]


def test_store_options_work_after_the_command(db: Path) -> None:
    assert slm("remember", "standup at nine", "--db", db, "--profile", "work").exit_code == 0
    listed = json.loads(slm("list", "--json", "--db", db, "--profile", "work").stdout)["memories"]
    assert [m["content"] for m in listed] == ["standup at nine"]
    # Given twice, the one after the command wins.
    home = slm("--db", db, "--profile", "home", "list", "--json")
    assert "no profile 'home'" in one_error_line(home, 1)  # holds nothing while work does
    assert len(json.loads(slm("--db", db, "--profile", "home", "list", "--json", "--profile",
                              "work").stdout)["memories"]) == 1  # fmt: skip
    assert "--profile" in slm("serve", "--help").stdout
    assert "--profile" in slm("mcp", "--help").stdout
    bad = slm("list", "--db", db, "--profile", "bad name!")
    assert "profile must match" in one_error_line(bad, 1)


@pytest.mark.parametrize(
    "command",
    [
        ["recall", "x"],
        ["get", "0123456789abcdef"],
        ["list"],
        ["trace", "x"],
        ["export", "-"],
        ["health"],
        ["backup", "copy.db"],
    ],
)
def test_reading_commands_never_create_a_store(
    tmp_path: Path, db: Path, command: list[str]
) -> None:
    typo = tmp_path / "typo.db"
    result = slm("--db", typo, *command)
    assert f"no store at {typo}" in one_error_line(result, 1)
    assert not typo.exists() and not (tmp_path / "copy.db").exists()


def test_a_writing_command_does_not_create_directories(tmp_path: Path, db: Path) -> None:
    missing = tmp_path / "no" / "such" / "m.db"
    result = slm("--db", missing, "remember", "x")
    assert "does not exist" in one_error_line(result, 1)
    assert not (tmp_path / "no").exists()
    assert slm("--db", db, "remember", "x").exit_code == 0 and db.exists()


def test_every_failure_is_one_line(tmp_path: Path, db: Path) -> None:
    slm("--db", db, "remember", "x")
    assert "'abc' is not a valid integer" in one_error_line(
        slm("--db", db, "recall", "q", "--k", "abc"), 2
    )
    assert "is a directory" in one_error_line(slm("--db", db, "import", tmp_path), 2)
    assert "No such command" in one_error_line(slm("--db", db, "recal", "q"), 2)
    assert "No such option" in one_error_line(slm("--db", db, "list", "--bogus"), 2)
    assert "Missing argument" in one_error_line(slm("--db", db, "remember"), 2)
    written = slm("--db", db, "export", tmp_path / "no" / "dir" / "x.jsonl")
    assert "cannot write" in one_error_line(written, 1)


def test_a_real_process_reports_a_usage_error_in_one_line(db: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "slm", "--db", str(db), "recall", "q", "--k", "abc"],
        capture_output=True,
        text=True,
        env={"SLM_EMBEDDER": "fake", "PATH": ""},
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1


def test_standard_input(db: Path) -> None:
    made = slm("--db", db, "remember", "-", "--json", input="Read from a pipe.\n")
    assert json.loads(made.stdout)["content"] == "Read from a pipe."
    lines = '{"content": "one"}\n{"content": "two"}\n'
    imported = slm("--db", db, "import", "-", "--json", input=lines)
    assert json.loads(imported.stdout) == {
        "read": 2, "stored": 2, "existing": 0, "renamed": 0, "feedback": 0, "feedback_skipped": 0,
        "system_skipped": 0,
    }  # fmt: skip
    bad = slm("--db", db, "import", "-", input='{"content": "three"}\nnot json\n')
    assert "line 2: not valid JSON" in one_error_line(bad, 1)
    assert slm("--db", db, "list", "--json").stdout.count('"content"') == 3


def test_import_progress_on_stderr_unless_quiet(tmp_path: Path, db: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(f'{{"content": "fact {i}"}}\n' for i in range(300)), "utf-8")
    shown = slm("--db", db, "import", source)
    # Done within the progress interval: the summary alone, counted once.
    assert shown.stderr == "" and shown.stdout == "read 300, stored 300, already present 0\n"
    quiet = slm("--db", db, "import", source, "--quiet")
    assert quiet.stderr == "" and quiet.stdout == "read 300, stored 0, already present 300\n"


def test_progress_lines_while_work_lasts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from slm.cli import output as cli_output

    monkeypatch.setattr(cli_output, "PROGRESS_EVERY", 0.0)
    with cli_output.progress(300, "read", quiet=False) as update:
        for _ in range(3):
            update(100)
    assert capsys.readouterr().err.splitlines() == [
        "read 100 of 300", "read 200 of 300", "read 300 of 300",
    ]  # fmt: skip


def test_human_output_says_what_it_shows(db: Path) -> None:
    made = slm(
        "--db", db, "remember", "The boiler is serviced every October", "--source", "home",
        "--tag", "house", "--meta", '{"room": "cellar"}', "--confidence", "0.9",
    )  # fmt: skip
    memory_id = made.stdout.split()[-1]
    assert made.stdout.startswith("remembered ")
    again = slm("--db", db, "remember", "The boiler is serviced every October")
    assert again.stdout.strip() == f"already stored as {memory_id} (identical content)"
    for text in ["Kettle descaling needs citric acid", "The cellar light is broken"]:
        slm("--db", db, "remember", text)

    recalled = slm("--db", db, "recall", "boiler service").stdout
    assert " 1. The boiler is serviced every October" in recalled
    assert "relevance 0." in recalled and "ranking 0." in recalled

    traced = slm("--db", db, "recall", "boiler service", "--trace").stdout
    assert traced.startswith("query    'boiler service'") and '"channels"' not in traced
    explained = slm("--db", db, "trace", "boiler", "--k", "1").stdout
    assert "Kettle descaling" in explained or "cellar light" in explained  # not returned
    assert re.search(r"\n[0-9.]+ ms \(interpret [0-9.]+, while embedding", explained)

    nothing = slm("--db", db, "recall", "quantum chromodynamics lecture notes").stdout
    assert nothing.startswith("Nothing stored")

    details = slm("--db", db, "get", memory_id).stdout
    for shown in ["source", "home", "0.9", "trust", "0.750", "house", '"room": "cellar"']:
        assert shown in details

    assert slm("--db", db, "list", "--tag", "nope").stdout.strip() == (
        "no memories matching these filters in profile 'default'"
    )


def test_no_install_hint_names_the_other_projects_distribution() -> None:
    """``slm`` on the package index is another project, and ``slm-memory`` is not there yet:
    every hint names a checkout (``.``) or a wheel built from one."""
    import re

    root = Path(__file__).resolve().parents[1]
    files = [root / "README.md", *(root / "docs").glob("*.md"), *(root / "src").rglob("*.py")]
    wrong = re.compile(r"pip install ['\"]?slm(?:\[|['\"\s)]|$)", re.MULTILINE)
    unpublished = re.compile(r"pip install ['\"]?slm-memory", re.MULTILINE)
    found = [
        f"{path}: {m.group()}"
        for path in files
        for pattern in (wrong, unpublished)
        for m in pattern.finditer(path.read_text())
    ]
    assert found == []
    assert "slm-memory" in (root / "pyproject.toml").read_text()


def test_reindex_reports_progress_while_it_lasts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from slm import Memory, Settings
    from slm.cli import cli
    from slm.cli import output as cli_output

    store = tmp_path / "big.db"
    with Memory(store, settings=Settings(embedder="fake")) as memory:
        memory.remember_many([{"content": f"note {i} about topic {i % 7}"} for i in range(1200)])
    monkeypatch.setattr(cli_output, "PROGRESS_EVERY", 0.0)
    monkeypatch.setenv("SLM_EMBEDDER", "fake")
    done = CliRunner().invoke(cli, ["--db", str(store), "reindex"])
    assert done.exit_code == 0, done.output
    assert done.stderr.splitlines() == [
        "reindexed 500 of 1200", "reindexed 1000 of 1200", "reindexed 1200 of 1200",
    ]  # fmt: skip
    assert done.stdout == "reindexed 1200 memories\n"
    quiet = CliRunner().invoke(cli, ["--db", str(store), "reindex", "--quiet"])
    assert quiet.stderr == ""
