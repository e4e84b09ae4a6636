"""``slm setup HOST`` (issue #63, item 1): every host's files, written in a throwaway HOME,
read back as the host reads them (JSON or TOML, and the keys its documentation names);
set-up twice is set-up once; ``--remove`` gives back the original byte for byte; a file
that does not parse is refused and left alone; what was there stays; ``--dry-run`` writes
nothing. Where the host's own command runs here (Claude Code, Gemini CLI, Codex CLI), it
is asked whether it sees slm; those tests skip without the command unless
SLM_REQUIRE_HOSTS=1."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from slm.cli import cli
from slm.hosts import jsonedit

#: read here, at import: the suite's autouse fixture clears SLM_* before each test
BIN_DIR = Path(os.environ.get("SLM_HOST_BIN_DIR", "/work/tools/node_modules/.bin"))
REQUIRE_HOSTS = os.environ.get("SLM_REQUIRE_HOSTS") == "1"
SLM = str(Path(sys.executable).parent / "slm")


@dataclass(frozen=True)
class Case:
    """One host and scope: the files it writes (relative to HOME or the project), and a
    file's text as it was before set-up, holding someone else's entries."""

    host: str
    scope: str
    files: tuple[str, ...]
    existing: dict[str, str]


JSONC_MCP = (
    "{\n"
    "    // the team's servers\n"
    '    "mcpServers": {\n'
    '        "github": {"command": "npx", "args": ["-y", "gh-mcp"]}, // keep me\n'
    "    },\n"
    "}\n"
)
PLAIN_MCP = json.dumps({"theme": "dark", "mcpServers": {"github": {"command": "npx"}}}, indent=2)
CLAUDE_SETTINGS = json.dumps(
    {
        "model": "opus",
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]},
    },
    indent=4,
)
CODEX_TOML = (
    "# my codex\n"
    'model = "o3"  # the best one\n'
    "\n"
    "[mcp_servers.github]\n"
    'command = "npx"\n'
    'args = ["-y", "gh-mcp"]\n'
)
VSCODE = (
    '{\n\t// mine\n\t"servers": {\n\t\t"gh": {"type": "stdio", "command": "npx",},\n\t},\n'
    '\t"inputs": [],\n}\n'
)

CASES = [
    Case("claude-code", "user", ("~/.claude.json", "~/.claude/settings.json"),
         {"~/.claude.json": PLAIN_MCP, "~/.claude/settings.json": CLAUDE_SETTINGS}),
    Case("claude-code", "project", (".mcp.json", ".claude/settings.json"),
         {".mcp.json": PLAIN_MCP, ".claude/settings.json": CLAUDE_SETTINGS}),
    Case("claude-desktop", "user", ("~/.config/Claude/claude_desktop_config.json",),
         {"~/.config/Claude/claude_desktop_config.json": PLAIN_MCP}),
    Case("cursor", "user", ("~/.cursor/mcp.json",), {"~/.cursor/mcp.json": JSONC_MCP}),
    Case("cursor", "project", (".cursor/mcp.json",), {".cursor/mcp.json": JSONC_MCP}),
    Case("vscode", "user", ("~/.config/Code/User/mcp.json",),
         {"~/.config/Code/User/mcp.json": VSCODE}),
    Case("vscode", "project", (".vscode/mcp.json",), {".vscode/mcp.json": VSCODE}),
    Case("windsurf", "user", ("~/.codeium/windsurf/mcp_config.json",),
         {"~/.codeium/windsurf/mcp_config.json": PLAIN_MCP}),
    Case("gemini-cli", "user", ("~/.gemini/settings.json",),
         {"~/.gemini/settings.json": PLAIN_MCP}),
    Case("gemini-cli", "project", (".gemini/settings.json",),
         {".gemini/settings.json": PLAIN_MCP}),
    Case("codex-cli", "user", ("~/.codex/config.toml", "~/.codex/hooks.json"),
         {"~/.codex/config.toml": CODEX_TOML, "~/.codex/hooks.json": CLAUDE_SETTINGS}),
    Case("codex-cli", "project", (".codex/config.toml", ".codex/hooks.json"),
         {".codex/config.toml": CODEX_TOML, ".codex/hooks.json": CLAUDE_SETTINGS}),
]  # fmt: skip
IDS = [f"{c.host}-{c.scope}" for c in CASES]


@dataclass(frozen=True)
class Machine:
    home: Path
    project: Path

    def path(self, name: str) -> Path:
        return self.home / name[2:] if name.startswith("~/") else self.project / name


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Machine:
    """A throwaway HOME (and configuration directory) and a project to run in."""
    home, project = tmp_path / "user", tmp_path / "work" / "project"
    home.mkdir()
    project.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("APPDATA", raising=False)
    monkeypatch.chdir(project)
    return Machine(home, project)


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["setup", *args], catch_exceptions=False)


def setup(case: Case, *more: str) -> Result:
    return run(case.host, "--scope", case.scope, *more)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def read_as_host(path: Path) -> Any:
    """The file as its host parses it: TOML, JSON, or (VS Code, Cursor) JSON with
    comments and trailing commas."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        return tomllib.loads(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        assert path.parts[-2] in (".vscode", ".cursor", "User"), f"{path} is not JSON"
        return jsonedit.parse(text).python()


def hook_commands(config: dict[str, Any]) -> dict[str, list[str]]:
    """Each event's hook command lines, split as a shell splits them."""
    return {
        event: [shlex.split(h["command"]) for group in groups for h in group["hooks"]]
        for event, groups in config["hooks"].items()
    }


def check_documented(case: Case, machine: Machine) -> None:
    """The keys each host's documentation names (docs/hosts.md), with slm's commands."""
    files = {name: read_as_host(machine.path(name)) for name in case.files}
    mcp_args = ["mcp", "--profile", "default"]
    if case.host == "codex-cli":
        config, hooks_file = files.values()
        assert config["mcp_servers"]["slm"] == {"command": SLM, "args": mcp_args}
        events = hook_commands(hooks_file)
        assert {"SessionStart", "UserPromptSubmit", "Stop"} <= set(events)
    elif case.host == "vscode":
        (config,) = files.values()
        assert config["servers"]["slm"] == {"type": "stdio", "command": SLM, "args": mcp_args}
        assert "mcpServers" not in config
    elif case.host == "claude-code":
        servers, settings = files.values()
        entry = {"type": "stdio", "command": SLM, "args": mcp_args}
        assert servers["mcpServers"]["slm"] == entry
        events = hook_commands(settings)
        expected = {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd"}
        assert expected <= set(events)
        handlers = [h for gs in settings["hooks"].values() for g in gs for h in g["hooks"]]
        ours = [h for h in handlers if "slm-hook" in h["command"]]
        assert len(ours) == 5 and all(h["type"] == "command" and h["timeout"] >= 10 for h in ours)
    elif case.host == "gemini-cli":
        (settings,) = files.values()
        assert settings["mcpServers"]["slm"] == {"command": SLM, "args": mcp_args}
        events = hook_commands(settings)
        expected = {"SessionStart", "BeforeAgent", "AfterAgent"}
        assert set(events) == expected
        assert all(h.get("name", "").startswith("slm-")
                   for g in settings["hooks"]["BeforeAgent"] for h in g["hooks"])  # fmt: skip
    else:
        (config,) = files.values()
        assert config["mcpServers"]["slm"] == {"command": SLM, "args": mcp_args}
    if case.host in ("claude-code", "gemini-cli", "codex-cli"):
        hooks = [w for lines in events.values() for w in lines]
        slm_hook = str(Path(sys.executable).parent / "slm-hook")
        for event, lines in events.items():
            ours = [w for w in lines if w[0] == slm_hook]
            assert ours == [[slm_hook, case.host, event, "--profile", "default"]], hooks


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_written_as_the_host_reads_it_and_twice_is_once(case: Case, machine: Machine) -> None:
    first = setup(case)
    assert first.exit_code == 0, first.output
    for name in case.files:
        assert f"created {machine.path(name)}" in first.output
    check_documented(case, machine)
    written = snapshot(machine.home) | snapshot(machine.project)
    again = setup(case)
    assert again.exit_code == 0 and "unchanged" in again.output
    assert snapshot(machine.home) | snapshot(machine.project) == written


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_remove_restores_the_original_byte_for_byte(case: Case, machine: Machine) -> None:
    for name, text in case.existing.items():
        machine.path(name).parent.mkdir(parents=True, exist_ok=True)
        machine.path(name).write_text(text, encoding="utf-8")
    before = snapshot(machine.home) | snapshot(machine.project)
    assert setup(case).exit_code == 0
    check_documented(case, machine)
    for name, text in case.existing.items():
        # what was there is still there: the other server, hooks, keys, comments
        edited = machine.path(name).read_text(encoding="utf-8")
        for line in text.splitlines():
            assert line.rstrip(",").strip().rstrip(",") in edited, line
        assert (machine.path(name).parent / (Path(name).name + ".slm-backup")).read_text(
            encoding="utf-8"
        ) == text
    removed = run("--remove", case.host, "--scope", case.scope)
    assert removed.exit_code == 0, removed.output
    assert snapshot(machine.home) | snapshot(machine.project) == before
    assert (machine.home / ".config").exists() == any(
        n.startswith("~/.config") for n in case.existing
    )


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_remove_after_other_changes_takes_out_only_slm(case: Case, machine: Machine) -> None:
    """The user edited the file after set-up: remove takes slm's entries out and keeps
    both the old entries and the new edit."""
    for name, text in case.existing.items():
        machine.path(name).parent.mkdir(parents=True, exist_ok=True)
        machine.path(name).write_text(text, encoding="utf-8")
    assert setup(case).exit_code == 0
    name = next(iter(case.existing))
    path = machine.path(name)
    if path.suffix == ".toml":
        path.write_text(path.read_text() + '\n[mcp_servers.later]\ncommand = "x"\n')
    else:
        edited = jsonedit.set_member(path.read_text(), (), "addedLater", True)
        path.write_text(edited)
    removed = run("--remove", case.host, "--scope", case.scope)
    assert removed.exit_code == 0, removed.output
    assert "only slm's entries were taken out" in removed.output
    config = read_as_host(path)
    servers = config.get("mcp_servers") or config.get("mcpServers") or config.get("servers")
    assert "slm" not in servers and len(servers) >= 1
    assert config.get("addedLater") is True or "later" in servers
    if "hooks" in config:
        assert not any("slm-hook" in line for event in hook_commands(config).values()
                       for words in event for line in words)  # fmt: skip
        assert hook_commands(config).get("Stop") == [["notify-send", "done"]]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_broken_file_is_refused_and_left_untouched(case: Case, machine: Machine) -> None:
    name = case.files[0]
    path = machine.path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    broken = b'[mcp_servers.x\ncommand = "' if path.suffix == ".toml" else b'{"mcpServers": {,}'
    path.write_bytes(broken)
    before = snapshot(machine.home) | snapshot(machine.project)
    result = setup(case)
    assert result.exit_code != 0
    line = result.output.strip()
    assert "\n" not in line and str(path) in line and "nothing was changed" in line
    assert snapshot(machine.home) | snapshot(machine.project) == before


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_dry_run_prints_the_diff_and_writes_nothing(case: Case, machine: Machine) -> None:
    for name, text in case.existing.items():
        machine.path(name).parent.mkdir(parents=True, exist_ok=True)
        machine.path(name).write_text(text, encoding="utf-8")
    before = snapshot(machine.home) | snapshot(machine.project)
    result = setup(case, "--dry-run")
    assert result.exit_code == 0
    assert f"+++ {machine.path(case.files[0])}" in result.output
    added = [line for line in result.output.splitlines() if line.startswith("+")]
    assert any('"slm": {' in line or line == "+[mcp_servers.slm]" for line in added)
    assert "dry run: nothing was written" in result.output
    assert snapshot(machine.home) | snapshot(machine.project) == before


def test_profile_and_db_reach_every_command_line(machine: Machine) -> None:
    db = machine.project / "team.db"
    result = CliRunner().invoke(
        cli, ["setup", "gemini-cli", "--profile", "team", "--db", str(db)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    settings = json.loads((machine.home / ".gemini" / "settings.json").read_text())
    options = ["--profile", "team", "--db", str(db)]
    assert settings["mcpServers"]["slm"]["args"] == ["mcp", *options]
    for lines in hook_commands(settings).values():
        assert lines[0][3:] == options
    # a new profile replaces slm's entries where they stand; still one group per event
    again = CliRunner().invoke(cli, ["setup", "gemini-cli"], catch_exceptions=False)
    assert again.exit_code == 0
    settings = json.loads((machine.home / ".gemini" / "settings.json").read_text())
    assert settings["mcpServers"]["slm"]["args"] == ["mcp", "--profile", "default"]
    assert all(len(lines) == 1 for lines in hook_commands(settings).values())


def test_list_shows_each_host_and_whether_it_is_set_up(machine: Machine) -> None:
    assert run("cursor", "--scope", "project").exit_code == 0
    listed = run("--list").output.splitlines()
    rows = {tuple(line.split()[:2]): line for line in listed}
    assert len(rows) == 12
    assert " set up " in rows[("cursor", "project")]
    assert " no " in rows[("cursor", "user")]
    assert " no " in rows[("claude-code", "user")]


def test_unknown_host_and_missing_scope_are_refused(machine: Machine) -> None:
    unknown = run("emacs")
    assert unknown.exit_code != 0 and "no host 'emacs'" in unknown.output
    scope = run("windsurf", "--scope", "project")
    assert scope.exit_code != 0 and "Windsurf has no project scope" in scope.output
    assert snapshot(machine.home) == {} and snapshot(machine.project) == {}


def test_remove_when_never_set_up_changes_nothing(machine: Machine) -> None:
    path = machine.home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text(JSONC_MCP)
    result = run("--remove", "cursor")
    assert result.exit_code == 0 and "nothing to remove" in result.output
    assert path.read_text() == JSONC_MCP


# The hosts' own commands, in the throwaway HOME -----------------------------------------


def host_command(name: str) -> str:
    for candidate in (BIN_DIR / name, shutil.which(name)):
        if candidate and Path(candidate).exists():
            return str(candidate)
    if REQUIRE_HOSTS:
        pytest.fail(f"SLM_REQUIRE_HOSTS=1 and no {name} in {BIN_DIR} or on PATH")
    pytest.skip(f"no {name} command (SLM_HOST_BIN_DIR, PATH)")


def ask(command: list[str], machine: Machine) -> str:
    env = {**os.environ, "HOME": str(machine.home), "NO_COLOR": "1"}
    done = subprocess.run(
        command, cwd=machine.project, env=env, capture_output=True, text=True, timeout=180
    )
    return done.stdout + done.stderr


needs_slm = pytest.mark.skipif(not Path(SLM).exists(), reason=f"no slm command at {SLM}")


@needs_slm
def test_claude_code_connects_to_slm(machine: Machine) -> None:
    claude = host_command("claude")
    assert run("claude-code").exit_code == 0
    listed = ask([claude, "mcp", "list"], machine)
    line = next(x for x in listed.splitlines() if x.startswith("slm:"))
    assert f"{SLM} mcp --profile default" in line and "Connected" in line, listed


@needs_slm
def test_gemini_cli_connects_to_slm(machine: Machine) -> None:
    gemini = host_command("gemini")
    assert run("gemini-cli").exit_code == 0
    # Gemini CLI starts no MCP server in a folder the user has not trusted
    trusted = machine.home / ".gemini" / "trustedFolders.json"
    trusted.write_text(json.dumps({str(machine.project): "TRUST_FOLDER"}))
    listed = ask([gemini, "mcp", "list"], machine)
    line = next(x for x in listed.splitlines() if "slm:" in x)
    assert f"{SLM} mcp --profile default" in line and "Connected" in line, listed


def test_codex_cli_lists_slm(machine: Machine) -> None:
    codex = host_command("codex")
    assert run("codex-cli").exit_code == 0
    listed = ask([codex, "mcp", "list", "--json"], machine)
    servers, _ = json.JSONDecoder().raw_decode(listed[listed.index("[") :])
    (slm,) = [s for s in servers if s["name"] == "slm"]
    assert slm["enabled"] is True
    assert slm["transport"]["command"] == SLM
    assert slm["transport"]["args"] == ["mcp", "--profile", "default"]


def test_a_linked_file_stays_a_link_and_keeps_its_mode(machine: Machine) -> None:
    """A dotfile managed elsewhere (a symbolic link) is edited where it points, and a
    private file (~/.claude.json is 0600) stays private."""
    dotfiles = machine.home / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "claude-settings.json"
    real.write_text(CLAUDE_SETTINGS)
    (machine.home / ".claude").mkdir()
    (machine.home / ".claude" / "settings.json").symlink_to(real)
    private = machine.home / ".claude.json"
    private.write_text(PLAIN_MCP)
    private.chmod(0o600)
    assert run("claude-code").exit_code == 0
    assert (machine.home / ".claude" / "settings.json").is_symlink()
    assert "slm-hook" in real.read_text()
    assert private.stat().st_mode & 0o777 == 0o600
    assert run("--remove", "claude-code").exit_code == 0
    assert real.read_text() == CLAUDE_SETTINGS and private.read_text() == PLAIN_MCP
    assert (machine.home / ".claude" / "settings.json").is_symlink()


def test_a_backup_deleted_since_still_lets_remove_take_slm_out(machine: Machine) -> None:
    path = machine.home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text(JSONC_MCP)
    assert run("cursor").exit_code == 0
    (path.parent / "mcp.json.slm-backup").unlink()
    removed = run("--remove", "cursor")
    assert removed.exit_code == 0, removed.output
    assert path.read_text() == JSONC_MCP


def test_list_says_when_a_file_cannot_be_read(machine: Machine) -> None:
    path = machine.home / ".codeium" / "windsurf" / "mcp_config.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    rows = {tuple(line.split()[:2]): line for line in run("--list").output.splitlines()}
    assert " unreadable " in rows[("windsurf", "user")]


@pytest.mark.parametrize(
    ("platform", "env", "desktop", "vscode"),
    [
        (
            "darwin",
            {},
            "Library/Application Support/Claude",
            "Library/Application Support/Code/User",
        ),
        ("win32", {"APPDATA": "roaming"}, "roaming/Claude", "roaming/Code/User"),
        ("linux", {"XDG_CONFIG_HOME": "xdg"}, "xdg/Claude", "xdg/Code/User"),
        ("linux", {}, ".config/Claude", ".config/Code/User"),
    ],
)
def test_each_systems_user_files(
    platform: str,
    env: dict[str, str],
    desktop: str,
    vscode: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Claude Desktop's and VS Code's per-user files are where each system keeps them."""
    from slm.hosts.setup import HOSTS, Commands, Place

    monkeypatch.setattr(sys, "platform", platform)
    given = {k: str(tmp_path / v) for k, v in env.items()}
    place = Place.here(tmp_path / "project", {"HOME": str(tmp_path), **given})
    commands = Commands(SLM, "slm-hook")
    (desktop_file,) = HOSTS["claude-desktop"].targets("user", place, commands)
    (vscode_file,) = HOSTS["vscode"].targets("user", place, commands)
    assert desktop_file.path == tmp_path / desktop / "claude_desktop_config.json"
    assert vscode_file.path == tmp_path / vscode / "mcp.json"
    (windsurf,) = HOSTS["windsurf"].targets("user", place, commands)
    assert windsurf.path == tmp_path / ".codeium" / "windsurf" / "mcp_config.json"


def test_a_file_that_would_not_read_back_is_refused(machine: Machine) -> None:
    """A key written twice: the host would read the last one, so slm refuses to guess."""
    path = machine.home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    text = '{"mcpServers": {"slm": {"command": "a"}, "slm": {"command": "b"}}}'
    path.write_text(text)
    result = run("cursor")
    assert result.exit_code != 0 and "would not read back as written" in result.output
    assert path.read_text() == text and not (path.parent / "mcp.json.slm-backup").exists()


@pytest.mark.parametrize("host", ["claude-code", "gemini-cli", "codex-cli"])
def test_every_event_setup_writes_is_one_slm_hook_handles(host: str) -> None:
    from slm.hosts import claude_code, codex_cli, gemini_cli
    from slm.hosts.hooks.thin import CAPTURE_EVENTS, INJECT_EVENTS

    hosts = {"claude-code": claude_code, "gemini-cli": gemini_cli, "codex-cli": codex_cli}
    written = hosts[host].EVENTS
    assert set(written) == set(INJECT_EVENTS[host]) | set(CAPTURE_EVENTS[host])
