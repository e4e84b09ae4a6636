"""Claude Code: its MCP server and its lifecycle hooks.

MCP servers: ``.mcp.json`` at the project's root (scope project) or ``~/.claude.json``
(scope user), both ``{"mcpServers": {NAME: {"type": "stdio", "command", "args"}}}``, as
``claude mcp add --scope project|user`` writes them. Hooks: ``.claude/settings.json`` in
the project or ``~/.claude/settings.json``, ``{"hooks": {EVENT: [{"hooks": [{"type":
"command", "command", "timeout"}]}]}}`` with the timeout in seconds."""

from __future__ import annotations

from slm.hosts.base import Commands, Host, Place, Target, hooks_json, mcp_json

NAME = "claude-code"
#: the events slm's hooks answer, with the host's time limit in seconds: above what the hook
#: itself waits (a session's start may start slm's warm process and load the model)
EVENTS = {
    "SessionStart": 30,
    "UserPromptSubmit": 10,
    "Stop": 30,
    "PreCompact": 30,
    "SessionEnd": 30,
}


def targets(scope: str, place: Place, commands: Commands) -> list[Target]:
    entry = {"type": "stdio", "command": commands.slm, "args": commands.mcp_args()}
    groups = {}
    for event, seconds in EVENTS.items():
        handler = {"type": "command", "command": commands.hook_line(NAME, event)}
        groups[event] = {"hooks": [{**handler, "timeout": seconds}]}
    if scope == "project":
        mcp, settings = place.project / ".mcp.json", place.project / ".claude" / "settings.json"
    else:
        mcp, settings = place.home / ".claude.json", place.home / ".claude" / "settings.json"
    return [mcp_json(mcp, "mcpServers", entry), hooks_json(settings, groups)]


HOST = Host(
    NAME,
    "Claude Code",
    ("user", "project"),
    "https://docs.anthropic.com/en/docs/claude-code/mcp (scopes), "
    "https://docs.anthropic.com/en/docs/claude-code/hooks (hooks)",
    targets,
)
