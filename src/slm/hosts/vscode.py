"""VS Code (GitHub Copilot's agent mode): ``.vscode/mcp.json`` in the workspace, or
``mcp.json`` in the user profile (``Code/User`` in the user's configuration directory),
``{"servers": {NAME: {"type": "stdio", "command", "args"}}}``: the key is ``servers``,
not ``mcpServers``. The file is JSONC; comments and trailing commas are kept."""

from __future__ import annotations

from slm.hosts.base import Commands, Host, Place, Target, mcp_json

NAME = "vscode"


def targets(scope: str, place: Place, commands: Commands) -> list[Target]:
    if scope == "project":
        path = place.project / ".vscode" / "mcp.json"
    else:
        path = place.config / "Code" / "User" / "mcp.json"
    entry = {"type": "stdio", "command": commands.slm, "args": commands.mcp_args()}
    return [mcp_json(path, "servers", entry)]


HOST = Host(
    NAME,
    "VS Code",
    ("user", "project"),
    "https://code.visualstudio.com/docs/copilot/reference/mcp-configuration",
    targets,
)
