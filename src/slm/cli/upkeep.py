"""``slm reindex``, ``slm migrate`` and ``slm backup``: the upkeep of a store (its derived
indexes rebuilt, its memories copied to another store, a copy of the whole file)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from slm.cli.base import Context, json_option, quiet_option
from slm.cli.output import answer, emit, memories, progress


@click.command()
@quiet_option
@json_option
@click.pass_obj
def reindex(obj: Context, quiet: bool, as_json: bool) -> None:
    """Rebuild the derived indexes (lexical, entities, dates, graph) from the stored memories."""
    with (
        obj.memory(create=False) as memory,
        progress(memory.count(), "reindexed", quiet) as update,
    ):
        count = memory.reindex(progress=update)
    answer({"reindexed": count}, f"reindexed {memories(count)}", as_json)


@click.command()
@click.option("--from", "source", required=True, help="Store to copy: a file or postgresql:// URL.")
@click.option("--to", "target", required=True, help="Store to copy into (created if new).")
@json_option
@click.pass_context
def migrate(ctx: click.Context, source: str, target: str, as_json: bool) -> None:
    """Copy every memory (ids, times, metadata, vectors, trust) to another store; re-run
    to resume. With --profile (or SLM_PROFILE), only that profile."""
    from slm.copy.stores import migrate as copy_store

    obj: Context = ctx.obj
    chosen = obj.profile_flag or os.environ.get("SLM_PROFILE")
    profiles = [obj.profile] if chosen else None
    done = 0

    def show_progress(read: int) -> None:
        nonlocal done
        done += read
        click.echo(f"\rread {done} memories", nl=False, err=True)

    interactive = sys.stderr.isatty() and not as_json
    reports = copy_store(
        source, target, profiles=profiles, progress=show_progress if interactive else None
    )
    if interactive:
        click.echo(err=True)
    if as_json:
        emit([r.to_dict() for r in reports])
        return
    for r in reports:
        click.echo(
            f"{r.profile}: read {r.read}, copied {r.copied}, already present {r.existing}"
            + (f", {r.renamed} under new ids (theirs were taken)" if r.renamed else "")
        )


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
@json_option
@click.pass_obj
def backup(obj: Context, path: Path, force: bool, as_json: bool) -> None:
    """Copy the whole store (every profile) to the file PATH while it stays in use."""
    from slm.copy.backup import backup as copy_store

    with obj.memory(create=False, whole_store=True) as memory:
        report = copy_store(memory, path, overwrite=force)
    done = {"file": report.path, "memories": report.memories, "bytes": report.bytes}
    answer(done, f"backed up {memories(report.memories)} to {report.path}", as_json)
