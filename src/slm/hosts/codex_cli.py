"""Codex CLI: ``~/.codex/config.toml`` (or ``.codex/config.toml`` in a trusted project)
with the table ``[mcp_servers.slm]`` (``command``, ``args``), and ``hooks.json`` beside it
with slm's hooks in the layout Claude Code uses (``{"hooks": {EVENT: [{"hooks":
[{"type": "command", "command"}]}]}}``, on by default in 0.171): SessionStart and
UserPromptSubmit (recall; the output is ``hookSpecificOutput.additionalContext`` as in
Claude Code) and Stop (capture: its payload holds the turn's reply,
``last_assistant_message``; the prompt is the one the warm process was asked for in the
same turn, ``turn_id``)."""

from __future__ import annotations

from slm.hosts.base import Commands, Host, Place, Target, hooks_json, mcp_toml

NAME = "codex-cli"
EVENTS = ("SessionStart", "UserPromptSubmit", "Stop")


def targets(scope: str, place: Place, commands: Commands) -> list[Target]:
    root = (place.project if scope == "project" else place.home) / ".codex"
    entry = {"command": commands.slm, "args": commands.mcp_args()}
    groups = {
        event: {"hooks": [{"type": "command", "command": commands.hook_line(NAME, event)}]}
        for event in EVENTS
    }
    return [mcp_toml(root / "config.toml", entry), hooks_json(root / "hooks.json", groups)]


HOST = Host(
    NAME,
    "Codex CLI",
    ("user", "project"),
    "https://developers.openai.com/codex/mcp (config.toml), "
    "https://developers.openai.com/codex/hooks (hooks.json)",
    targets,
)
