"""Codex CLI: ``~/.codex/config.toml`` (or ``.codex/config.toml`` in a trusted project)
with the table ``[mcp_servers.slm]`` (``command``, ``args``).

Codex CLI has lifecycle hooks too (``hooks.json`` beside ``config.toml``, the layout Claude
Code uses, on by default in 0.171), but ``slm-hook`` does not read Codex's payloads yet, so
none are written: a hook that can only log "unknown host" would cost every prompt a process
start for nothing. Adding them is :func:`slm.hosts.base.hooks_json` here once it does."""

from __future__ import annotations

from slm.hosts.base import Commands, Host, Place, Target, mcp_toml

NAME = "codex-cli"


def targets(scope: str, place: Place, commands: Commands) -> list[Target]:
    root = (place.project if scope == "project" else place.home) / ".codex"
    entry = {"command": commands.slm, "args": commands.mcp_args()}
    return [mcp_toml(root / "config.toml", entry)]


HOST = Host(
    NAME,
    "Codex CLI",
    ("user", "project"),
    "https://developers.openai.com/codex/mcp (config.toml)",
    targets,
)
