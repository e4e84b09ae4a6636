"""Cursor: ``.cursor/mcp.json`` in the project or ``~/.cursor/mcp.json`` for every
project, ``{"mcpServers": {NAME: {"command", "args"}}}``. Cursor's files may hold comments;
they are kept."""

from __future__ import annotations

from slm.hosts.base import Commands, Host, Place, Target, mcp_json

NAME = "cursor"


def targets(scope: str, place: Place, commands: Commands) -> list[Target]:
    root = place.project if scope == "project" else place.home
    entry = {"command": commands.slm, "args": commands.mcp_args()}
    return [mcp_json(root / ".cursor" / "mcp.json", "mcpServers", entry)]


HOST = Host(NAME, "Cursor", ("user", "project"), "https://cursor.com/docs/context/mcp", targets)
