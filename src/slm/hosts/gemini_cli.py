"""Gemini CLI: ``.gemini/settings.json`` in the project or ``~/.gemini/settings.json``,
holding both ``{"mcpServers": {NAME: {"command", "args"}}}`` and ``{"hooks": {EVENT:
[{"hooks": [{"name", "type": "command", "command"}]}]}}`` (hooks are on by default since
``hooksConfig.enabled`` defaults to true). The events written are the ones ``slm-hook``
handles: SessionStart, BeforeAgent (a prompt, before planning: recall) and AfterAgent (a
turn's end: capture, from the turn its payload holds). PreCompress and SessionEnd are not
written: their payloads carry only ``transcript_path``, to Gemini CLI's own chat file, which
slm does not read, and AfterAgent has already stored every turn by then."""

from __future__ import annotations

from slm.hosts.base import Commands, Host, Place, Target, hooks_json, mcp_json

NAME = "gemini-cli"
EVENTS = ("SessionStart", "BeforeAgent", "AfterAgent")


def targets(scope: str, place: Place, commands: Commands) -> list[Target]:
    root = place.project if scope == "project" else place.home
    path = root / ".gemini" / "settings.json"
    groups = {}
    for event in EVENTS:
        handler = {"type": "command", "command": commands.hook_line(NAME, event)}
        groups[event] = {"hooks": [{"name": f"slm-{event}", **handler}]}
    entry = {"command": commands.slm, "args": commands.mcp_args()}
    return [mcp_json(path, "mcpServers", entry), hooks_json(path, groups)]


HOST = Host(
    NAME,
    "Gemini CLI",
    ("user", "project"),
    "https://geminicli.com/docs/tools/mcp-server (mcpServers), "
    "https://geminicli.com/docs/hooks/reference (hooks)",
    targets,
)
