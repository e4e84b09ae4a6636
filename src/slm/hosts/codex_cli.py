"""Codex CLI: ``~/.codex/config.toml`` (or ``.codex/config.toml`` in a trusted project)
with the table ``[mcp_servers.slm]`` (``command``, ``args``), and ``hooks.json`` beside it,
``{"hooks": {EVENT: [{"hooks": [{"type": "command", "command", "timeout"}]}]}}`` (hooks are
a stable feature, on by default, in Codex CLI 0.171)."""

from __future__ import annotations

from slm.hosts.base import Commands, Host, Place, Target, hooks_json, mcp_toml

NAME = "codex-cli"
EVENTS = {"SessionStart": 10, "UserPromptSubmit": 10, "Stop": 30, "PreCompact": 30}


def targets(scope: str, place: Place, commands: Commands) -> list[Target]:
    root = (place.project if scope == "project" else place.home) / ".codex"
    groups = {}
    for event, seconds in EVENTS.items():
        handler = {"type": "command", "command": commands.hook_line(NAME, event)}
        groups[event] = {"hooks": [{**handler, "timeout": seconds}]}
    entry = {"command": commands.slm, "args": commands.mcp_args()}
    return [mcp_toml(root / "config.toml", entry), hooks_json(root / "hooks.json", groups)]


HOST = Host(
    NAME,
    "Codex CLI",
    ("user", "project"),
    "https://developers.openai.com/codex/mcp (config.toml), "
    "https://developers.openai.com/codex/hooks (hooks.json)",
    targets,
)
