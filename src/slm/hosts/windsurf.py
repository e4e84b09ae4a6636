"""Windsurf: ``~/.codeium/windsurf/mcp_config.json`` (``%USERPROFILE%`` on Windows),
``{"mcpServers": {NAME: {"command", "args"}}}``; one file for every project."""

from __future__ import annotations

from slm.hosts.base import Commands, Host, Place, Target, mcp_json

NAME = "windsurf"


def targets(scope: str, place: Place, commands: Commands) -> list[Target]:
    path = place.home / ".codeium" / "windsurf" / "mcp_config.json"
    return [mcp_json(path, "mcpServers", {"command": commands.slm, "args": commands.mcp_args()})]


HOST = Host(NAME, "Windsurf", ("user",), "https://docs.windsurf.com/windsurf/cascade/mcp", targets)
