"""Claude Desktop: ``claude_desktop_config.json`` in the user's application data
(``~/Library/Application Support/Claude`` on macOS, ``%APPDATA%\\Claude`` on Windows,
``~/.config/Claude`` on Linux), ``{"mcpServers": {NAME: {"command", "args"}}}``. It has no
hooks and no project scope."""

from __future__ import annotations

from slm.hosts.base import Commands, Host, Place, Target, mcp_json

NAME = "claude-desktop"


def targets(scope: str, place: Place, commands: Commands) -> list[Target]:
    path = place.config / "Claude" / "claude_desktop_config.json"
    return [mcp_json(path, "mcpServers", {"command": commands.slm, "args": commands.mcp_args()})]


HOST = Host(
    NAME,
    "Claude Desktop",
    ("user",),
    "https://modelcontextprotocol.io/quickstart/user (claude_desktop_config.json per OS)",
    targets,
)
