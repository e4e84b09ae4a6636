"""``slm setup HOST``: write slm's MCP server (and, where the host has them, its hooks)
into an agent host's own configuration; ``--remove`` takes them out, ``--list`` shows
every host and whether it is set up (docs/hosts.md)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click

from slm.cli.base import Context
from slm.errors import ConfigError
from slm.hosts.edit import Change, apply, finish_undo
from slm.hosts.setup import HOSTS, Commands, Ledger, Place, host, removal, scope_of, status
from slm.hosts.setup import setup as plan_setup
from slm.settings import data_dir


@click.command()
@click.argument("host_name", metavar="HOST", required=False)
@click.option(
    "--scope",
    type=click.Choice(["user", "project"]),
    help="user: every project (the default); project: this directory's files.",
)
@click.option("--remove", is_flag=True, help="Take slm out of HOST's files (every scope).")
@click.option(
    "--list", "list_hosts", is_flag=True, help="Show every host and whether it is set up."
)
@click.option("--dry-run", is_flag=True, help="Print the change as a diff; write nothing.")
@click.pass_obj
def setup(
    obj: Context,
    host_name: str | None,
    scope: str | None,
    remove: bool,
    list_hosts: bool,
    dry_run: bool,
) -> None:
    """Connect an agent host to slm: its MCP server, and for claude-code, gemini-cli, codex-cli
    its hooks (recall before a prompt, capture after a turn). HOST is one of: claude-code,
    claude-desktop, cursor, vscode, windsurf, gemini-cli, codex-cli. The host's memories
    go to --profile (default: default) in --db (default: slm's usual file)."""
    place = Place.here(Path.cwd())
    if list_hosts:
        _list(place)
        return
    if host_name is None:
        raise click.UsageError(f"name a HOST ({', '.join(HOSTS)}) or use --list")
    chosen = host(host_name)
    ledger = Ledger(data_dir() / "setup.json")
    if remove:
        scopes = [scope_of(chosen, scope)] if scope else list(chosen.scopes)
        changes = removal(chosen, scopes, place, ledger)
        if dry_run:
            _show(changes)
            return
        notes = finish_undo(changes, ledger)
        _report_removal(changes)
        for note in notes:
            click.echo(note)
        return
    if obj.dsn:
        raise ConfigError("slm setup writes a SQLite store (--db) into the host's files; "
                          "a PostgreSQL DSN (--dsn, SLM_DSN) is not supported there")  # fmt: skip
    commands = Commands(
        _script("slm"),
        _script("slm-hook"),
        obj.profile,
        str(Path(obj.db).expanduser().resolve()) if obj.db else None,
    )
    changes = plan_setup(chosen, scope_of(chosen, scope), place, commands)
    if dry_run:
        _show(changes)
        return
    backups = apply(changes, ledger)
    _report(changes)
    for backup in backups:
        click.echo(f"kept the original as {backup}")
    if not Path(commands.hook).exists() and any("hooks" in c.what for c in changes):
        click.echo(f"note: {commands.hook} is not installed yet; the hooks run once it is "
                   "(reinstall slm)", err=True)  # fmt: skip


def _script(name: str) -> str:
    """The absolute path of one of slm's commands: beside the running interpreter (the
    same installation), else on PATH, else where it would be installed."""
    suffix = ".exe" if os.name == "nt" else ""
    beside = Path(sys.executable).parent / (name + suffix)
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    return found if found else str(beside)


def _show(changes: list[Change]) -> None:
    shown = [c for c in changes if c.changed]
    for change in shown:
        click.echo(change.diff(), nl=False)
    click.echo("dry run: nothing was written" if shown else "nothing to change")


def _report(changes: list[Change]) -> None:
    for change in changes:
        if not change.changed:
            click.echo(f"unchanged {change.path} ({change.what}: already set up)")
        elif change.before is None:
            click.echo(f"created {change.path} ({change.what})")
        else:
            click.echo(f"wrote {change.path} ({change.what})")


def _report_removal(changes: list[Change]) -> None:
    for change in changes:
        if not change.changed:
            continue
        if change.after is None:
            click.echo(f"deleted {change.path} (set-up had created it)")
        elif change.restores:
            click.echo(f"restored {change.path} as it was before set-up")
        else:
            click.echo(f"took slm's {change.what} out of {change.path}")
    if not any(c.changed for c in changes):
        click.echo("slm was not set up there: nothing to remove")


def _list(place: Place) -> None:
    for chosen in HOSTS.values():
        for scope in chosen.scopes:
            state, paths = status(chosen, scope, place)
            files = ", ".join(str(p) for p in paths)
            click.echo(f"{chosen.name:<15} {scope:<8} {state:<10} {files}")
