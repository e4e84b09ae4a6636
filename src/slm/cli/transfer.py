"""``slm import`` and ``slm export``: memories (and conversations) in from JSON Lines, and a
lossless copy of a profile out (docs/transfer.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from slm.cli.base import Context, json_option, owner_of, owner_options, quiet_option, readable
from slm.cli.output import answer, emit, memories, progress
from slm.inputs.conversations import SYSTEM_CHOICES


@click.command(name="import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option(
    "--system",
    type=click.Choice(SYSTEM_CHOICES),
    default="skip",
    show_default=True,
    help="A chat transcript's system messages: left out and counted, or kept as standing "
    "instructions.",
)
@owner_options
@quiet_option
@json_option
@click.pass_obj
def import_(
    obj: Context, /, file: Path, system: str, quiet: bool, as_json: bool, **options: Any
) -> None:
    """Store every memory of a JSON Lines FILE, or of a chat transcript ('-' reads standard
    input), as one user's with --user (every memory's metadata gets it); the whole file is
    validated first, a failure stores nothing, and a re-run stores nothing twice."""
    from slm.copy.jsonl import check_jsonl, import_jsonl
    from slm.inputs import scope as owners

    with obj.memory() as memory, readable(file) as path:
        owner = owners.given(memory.settings.scope_keys, **owner_of(options))
        total = check_jsonl(memory, path, system, owner)
        with progress(total, "read", quiet) as update:
            report = import_jsonl(memory, path, progress=update, system=system, owner=owner)
    if as_json:
        emit(report.to_dict())
        return
    line = f"read {report.read}, stored {report.stored}, already present {report.existing}"
    if report.renamed:
        line += f"; {report.renamed} under a new id (theirs is taken in this store)"
    if report.feedback or report.feedback_skipped:
        line += f"; {report.feedback} feedback events recorded"
        line += f", {report.feedback_skipped} already there" if report.feedback_skipped else ""
    if skipped := report.system_skipped:
        line += (
            f"; {skipped} system message{'s' * (skipped > 1)} skipped (--system keep stores them)"
        )
    click.echo(line)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
@json_option
@click.pass_obj
def export(obj: Context, file: Path, force: bool, as_json: bool) -> None:
    """Write every memory of the profile to a JSON Lines FILE ('-' for stdout). An
    existing FILE is refused unless --force; the store and its files always are."""
    from slm.copy.backup import target_file
    from slm.copy.jsonl import export_jsonl
    from slm.store.files import replacing

    with obj.memory(create=False) as memory:
        if str(file) == "-":
            count = export_jsonl(memory, sys.stdout)
            return
        path = target_file(memory, file, overwrite=force, what="export")
        try:
            with replacing(path) as tmp:
                with open(tmp, "w", encoding="utf-8") as handle:
                    count = export_jsonl(memory, handle)
                tmp.replace(path)
        except OSError as exc:
            raise click.ClickException(f"cannot write {file}: {exc.strerror}") from None
    answer({"exported": count, "file": str(file)}, f"exported {memories(count)} to {file}", as_json)
