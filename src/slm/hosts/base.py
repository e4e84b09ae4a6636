"""What every host adapter shares: where a host keeps its files (:class:`Place`), what slm
writes into them (:class:`Commands`), a host's description (:class:`Host`) and the files it
edits (:class:`Target`), with the three shapes those files take: an MCP server map in JSON,
lifecycle hooks in JSON, and an MCP server table in TOML."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from slm.hosts import jsonedit, tomledit

#: the name slm's MCP server has in every host's configuration
SERVER = "slm"
#: the basename of the hook command (the hooks' own package installs it beside ``slm``)
HOOK_COMMAND = "slm-hook"


@dataclass(frozen=True)
class Place:
    """Where a host's files are on this machine: resolved once, at the edge."""

    home: Path
    project: Path
    system: str  # "linux", "darwin" or "windows"
    #: the per-user configuration directory (XDG_CONFIG_HOME, %APPDATA%, ~/Library/...)
    config: Path

    @classmethod
    def here(cls, project: Path, env: Mapping[str, str] | None = None) -> Place:
        env = os.environ if env is None else env
        home = Path(env.get("HOME") or env.get("USERPROFILE") or Path.home())
        system = {"win32": "windows", "darwin": "darwin"}.get(sys.platform, "linux")
        if system == "windows":
            config = Path(env.get("APPDATA") or home / "AppData" / "Roaming")
        elif system == "darwin":
            config = home / "Library" / "Application Support"
        else:
            config = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
        return cls(home, project.resolve(), system, config)


@dataclass(frozen=True)
class Commands:
    """The command lines slm writes: its MCP server and its hook, for one profile."""

    slm: str
    hook: str
    profile: str = "default"
    db: str | None = None

    def options(self) -> list[str]:
        return ["--profile", self.profile] + (["--db", self.db] if self.db else [])

    def mcp_args(self) -> list[str]:
        return ["mcp", *self.options()]

    def hook_line(self, host: str, event: str) -> str:
        """The hook as one shell line (the hosts run hook commands through a shell)."""
        return shlex.join([self.hook, host, event, *self.options()])


@dataclass(frozen=True)
class Target:
    """One file a host reads, and how slm's entries go in and come out of its text."""

    path: Path
    what: str  # "MCP server" or "hooks"
    add: Callable[[str], str]
    strip: Callable[[str], str]
    holds: Callable[[str], bool]


@dataclass(frozen=True)
class Host:
    """A host slm can set up: its name on the command line, the scopes it has (the first
    is the default), the documentation followed, and the files for a scope."""

    name: str
    title: str
    scopes: tuple[str, ...]
    doc: str
    targets: Callable[[str, Place, Commands], list[Target]]


def is_slm_hook(handler: Any) -> bool:
    """Whether a host's hook handler runs slm's hook command."""
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    try:
        words = shlex.split(handler["command"])
    except ValueError:
        return False
    return bool(words) and PurePath(words[0]).name in (HOOK_COMMAND, HOOK_COMMAND + ".exe")


def mcp_json(path: Path, container: str, entry: dict[str, Any]) -> Target:
    """slm as ``{container: {"slm": entry}}`` in a JSON (or JSONC) file."""
    where = (container,)

    def add(text: str) -> str:
        before = jsonedit.parse(text)
        found = jsonedit.find(before, (*where, SERVER))
        if found is not None and found.python() == entry:
            return text
        edited = jsonedit.set_member(text, where, SERVER, entry)
        expected = before.python() if before.start >= 0 else {}
        expected.setdefault(container, {})[SERVER] = entry
        if jsonedit.parse(edited).python() != expected:
            raise jsonedit.Unreadable(f"{container}.{SERVER} would not read back as written")
        return edited

    def strip(text: str) -> str:
        root = jsonedit.parse(text)
        servers = jsonedit.find(root, where)
        if servers is None or servers.get(SERVER) is None:
            return text
        if len(servers.members) == 1:
            return jsonedit.remove_member(text, (), container)
        return jsonedit.remove_member(text, where, SERVER)

    def holds(text: str) -> bool:
        return jsonedit.find(jsonedit.parse(text), (*where, SERVER)) is not None

    return Target(path, "MCP server", add, strip, holds)


def hooks_json(path: Path, groups: Mapping[str, dict[str, Any]]) -> Target:
    """slm's hooks as ``{"hooks": {EVENT: [group, ...]}}`` (the layout Claude Code, Gemini
    CLI and Codex CLI share): one matcher group per event whose handlers are all slm's.
    Setting up again replaces slm's groups and leaves every other group where it is."""

    def ours(group: Any) -> list[int]:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list):
            return []
        return [i for i, handler in enumerate(handlers) if is_slm_hook(handler)]

    def add(text: str) -> str:
        for event, group in groups.items():
            node = jsonedit.find(jsonedit.parse(text), ("hooks", event))
            present = node.python() if node is not None else None
            if node is not None and not isinstance(present, list):
                raise jsonedit.Unreadable(f"hooks.{event} is not a list")
            mine = [i for i, g in enumerate(present or []) if ours(g)]
            if len(mine) == 1 and present is not None and present[mine[0]] == group:
                continue
            text = _strip_event(text, event, ours, drop_empty=False)
            text = jsonedit.append_element(text, ("hooks", event), group)
            after = jsonedit.find(jsonedit.parse(text), ("hooks", event))
            if after is None or [g for g in after.python() if ours(g)] != [group]:
                raise jsonedit.Unreadable(f"hooks.{event} would not read back as written")
        return text

    def strip(text: str) -> str:
        node = jsonedit.find(jsonedit.parse(text), ("hooks",))
        if node is None or node.kind != "object":
            return text
        for event in [m.key for m in node.members if m.key is not None]:
            text = _strip_event(text, event, ours, drop_empty=True)
        hooks = jsonedit.find(jsonedit.parse(text), ("hooks",))
        if hooks is not None and hooks.kind == "object" and not hooks.members:
            text = jsonedit.remove_member(text, (), "hooks")
        return text

    def holds(text: str) -> bool:
        node = jsonedit.find(jsonedit.parse(text), ("hooks",))
        value = node.python() if node is not None else None
        if not isinstance(value, dict):
            return False
        return any(ours(g) for v in value.values() if isinstance(v, list) for g in v)

    return Target(path, "hooks", add, strip, holds)


def _strip_event(
    text: str, event: str, ours: Callable[[Any], list[int]], *, drop_empty: bool
) -> str:
    """``text`` without slm's handlers under ``hooks.EVENT``: a group left with none is
    removed, and (``drop_empty``) so is the event when slm's were its only groups."""
    node = jsonedit.find(jsonedit.parse(text), ("hooks", event))
    if node is None or node.kind != "array":
        return text
    groups = node.python()
    touched = False
    for index in reversed(range(len(groups))):
        mine = ours(groups[index])
        if not mine:
            continue
        touched = True
        if len(mine) == len(groups[index]["hooks"]):
            text = jsonedit.remove_element(text, ("hooks", event), index)
            continue
        for handler in reversed(mine):
            text = jsonedit.remove_element(text, ("hooks", event, str(index), "hooks"), handler)
    after = jsonedit.find(jsonedit.parse(text), ("hooks", event))
    if drop_empty and touched and after is not None and not after.members:
        text = jsonedit.remove_member(text, ("hooks",), event)
    return text


def mcp_toml(path: Path, entry: dict[str, Any]) -> Target:
    """slm as ``[mcp_servers.slm]`` in a TOML file."""
    where = ("mcp_servers", SERVER)

    def add(text: str) -> str:
        if tomledit.table(tomledit.parse(text), where) == entry:
            return text
        return tomledit.set_table(text, where, entry)

    def strip(text: str) -> str:
        return tomledit.remove_table(text, where)

    def holds(text: str) -> bool:
        return tomledit.table(tomledit.parse(text), where) is not None

    return Target(path, "MCP server", add, strip, holds)
