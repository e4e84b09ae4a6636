"""What ``slm setup HOST`` does: each host's module says which files it reads and how
slm's MCP server and hooks are written there (docs/hosts.md); this module holds the list of
hosts and turns a host into changes, for :mod:`slm.hosts.edit` to write as one transaction.

Nothing here imports the engine: setting a host up loads no model and opens no store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from slm.errors import ConfigError
from slm.hosts import (
    claude_code,
    claude_desktop,
    codex_cli,
    cursor,
    gemini_cli,
    vscode,
    windsurf,
)
from slm.hosts.base import Commands, Host, Place, Target
from slm.hosts.edit import Change, Ledger, plan, plan_undo

#: every host ``slm setup`` knows, by its name on the command line
HOSTS: dict[str, Host] = {
    host.name: host
    for host in (
        claude_code.HOST,
        claude_desktop.HOST,
        cursor.HOST,
        vscode.HOST,
        windsurf.HOST,
        gemini_cli.HOST,
        codex_cli.HOST,
    )
}

__all__ = ["HOSTS", "Change", "Commands", "Host", "Ledger", "Place", "host", "removal", "setup",
           "status"]  # fmt: skip


def host(name: str) -> Host:
    try:
        return HOSTS[name]
    except KeyError:
        raise ConfigError(f"no host {name!r}; the hosts are {', '.join(sorted(HOSTS))}") from None


def scope_of(chosen: Host, scope: str | None) -> str:
    """The scope asked for, or the host's default; a scope the host lacks is refused."""
    if scope is None:
        return chosen.scopes[0]
    if scope not in chosen.scopes:
        raise ConfigError(f"{chosen.title} has no {scope} scope (only {', '.join(chosen.scopes)})")
    return scope


def _by_file(targets: list[Target]) -> dict[Path, list[Target]]:
    """Targets grouped by file, in order: two edits of one file are one change."""
    grouped: dict[Path, list[Target]] = {}
    for target in targets:
        grouped.setdefault(target.path, []).append(target)
    return grouped


def _chain(steps: list[Callable[[str], str]]) -> Callable[[str], str]:
    def run(text: str) -> str:
        for step in steps:
            text = step(text)
        return text

    return run


def _what(targets: list[Target]) -> str:
    return " and ".join(dict.fromkeys(t.what for t in targets))


def setup(chosen: Host, scope: str, place: Place, commands: Commands) -> list[Change]:
    """The changes that write slm into ``chosen``'s files (all read and parsed first)."""
    grouped = _by_file(chosen.targets(scope, place, commands))
    return [plan(path, _chain([t.add for t in ts]), _what(ts)) for path, ts in grouped.items()]


def removal(chosen: Host, scopes: list[str], place: Place, ledger: Ledger) -> list[Change]:
    """The changes that take slm out of ``chosen``'s files in ``scopes``."""
    unused = Commands("slm", "slm-hook")  # taking entries out does not depend on them
    targets = [t for scope in scopes for t in chosen.targets(scope, place, unused)]
    grouped = _by_file(targets)  # a project that is the home directory: one file, once
    return [
        plan_undo(path, _chain([t.strip for t in ts]), ledger, _what(ts))
        for path, ts in grouped.items()
    ]


def status(chosen: Host, scope: str, place: Place) -> tuple[str, list[Path]]:
    """Whether slm is in the host's files for ``scope``: "set up", "partly", "no" or
    "unreadable", and the files."""
    targets = chosen.targets(scope, place, Commands("slm", "slm-hook"))
    held = []
    for target in targets:
        try:
            text = target.path.read_text(encoding="utf-8")
            held.append(target.holds(text))
        except FileNotFoundError:
            held.append(False)
        except (OSError, ValueError):
            return "unreadable", [t.path for t in targets]
    state = "set up" if all(held) else "partly" if any(held) else "no"
    return state, list(dict.fromkeys(t.path for t in targets))
