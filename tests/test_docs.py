"""The documentation says what the program does (issue #30): the README's and the docs'
Python blocks run (each either runs here or says why it cannot, in an HTML comment just
before it), and every ``slm`` command line the README shows names a real command with real
options. The MCP tool table and the REST routes are checked against the running servers in
tests/test_mcp.py and tests/test_http.py."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import click
import pytest

from slm import Memory, Settings
from slm.cli import cli
from slm.embed.minilm import MiniLMEmbedder

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- not run: [^>]+ -->\n)?```python\n(.*?)```", re.DOTALL)
#: Pages whose Python blocks a reader copies whole: they run with nothing given.
SELF_CONTAINED = {"README.md", "integrations.md"}


def python_blocks() -> list[tuple[str, int, str, bool]]:
    """(file, block number, code, runnable) for every Python block of the docs."""
    found = []
    for path in DOCS:
        for number, match in enumerate(BLOCK.finditer(path.read_text(encoding="utf-8")), 1):
            found.append((path.name, number, match.group(2), match.group(1) is None))
    return found


@pytest.mark.parametrize(
    ("name", "number", "code"),
    [(name, number, code) for name, number, code, runs in python_blocks() if runs],
    ids=lambda value: str(value)[:20],
)
def test_python_blocks_run(
    name: str,
    number: int,
    code: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    minilm: MiniLMEmbedder,
) -> None:
    """Each block runs as a user would run it, in a fresh directory with the real model; a
    snippet that uses ``memory`` or ``old_id`` gets a store with a few memories to work on,
    except on the pages whose snippets are copied whole (:data:`SELF_CONTAINED`)."""
    (tmp_path / "run").mkdir()
    monkeypatch.chdir(tmp_path / "run")
    with Memory(tmp_path / "given.db", embedder=minilm, settings=Settings()) as memory:
        old = memory.remember("Priya lives in Lisbon", event_time="2023-01-01")
        memory.remember("The boiler is serviced every October by Kelvin Heating")
        memory.remember("The boiler's pressure should stay near 1.5 bar")
        namespace = {"memory": memory, "old_id": old.id, "Memory": Memory, "Settings": Settings}
        if name in SELF_CONTAINED:
            namespace = {}
        exec(compile(code, f"{name} block {number}", "exec"), namespace)


def test_every_python_block_runs_or_says_why_not() -> None:
    blocks = python_blocks()
    assert blocks and sum(runs for *_, runs in blocks) >= 4


def readme_command_lines() -> list[str]:
    """Every ``slm ...`` line of the README's shell blocks, continuation lines joined."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.DOTALL):
        joined = block.replace("\\\n", " ")
        lines += [line for line in joined.splitlines() if line.startswith("slm ")]
    return lines


@pytest.mark.parametrize("line", readme_command_lines(), ids=lambda line: line[:40])
def test_readme_commands_name_real_commands_and_options(line: str) -> None:
    words = shlex.split(line.split("  #")[0].split(" # ")[0])[1:]
    words = [w.strip("[]") for w in words if w.strip("[]") and w != "..."]
    command: click.Command = cli
    context = click.Context(cli)
    options = {o for p in cli.params for o in getattr(p, "opts", [])}
    for word in words:
        if isinstance(command, click.Group) and word in command.list_commands(context):
            command = command.get_command(context, word)  # type: ignore[assignment]
            options |= {o for p in command.params for o in getattr(p, "opts", [])}
            options |= {o for p in command.params for o in getattr(p, "secondary_opts", [])}
    named = {w.split("=")[0] for w in words if w.startswith("--")}
    assert command is not cli, f"{line}: no such command"
    assert named <= options, f"{line}: {sorted(named - options)} not options of that command"


def test_the_readme_lists_every_command() -> None:
    shown = " ".join(readme_command_lines())
    for name in cli.list_commands(click.Context(cli)):
        assert f"slm {name}" in shown or (name == "bench" and "slm bench" in shown), name
    assert os.path.exists(ROOT / "LICENSE") and "Apache License" in (ROOT / "LICENSE").read_text()
