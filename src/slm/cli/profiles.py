"""``slm profiles``: the profiles of a store, with how many memories each holds and when it
was last written; ``slm profiles delete NAME`` removes one whole (asking first)."""

from __future__ import annotations

import sys

import click

from slm.cli.base import Context, json_option
from slm.cli.output import answer, emit, memories, printable
from slm.errors import InvalidInput


@click.group(invoke_without_command=True)
@json_option
@click.pass_context
def profiles(ctx: click.Context, as_json: bool) -> None:
    """List the store's profiles: memories held and last write (or delete one)."""
    if ctx.invoked_subcommand is not None:
        return
    from slm.profiles import profiles as listed

    obj: Context = ctx.obj
    if not obj.location().exists():
        emit({"profiles": []}) if as_json else click.echo("no profile holds memories yet")
        return
    with obj.memory(create=False, whole_store=True) as memory:
        found = listed(memory)
        where = memory.location
    if as_json:
        emit({"profiles": [p.to_dict() for p in found]})
        return
    if not found:
        click.echo(f"no profile holds memories in {where} yet")
        return
    names = {p.name: printable(p.name) for p in found}
    width = max(len(shown) for shown in names.values())
    for p in found:
        written = p.last_write.strftime("%Y-%m-%d %H:%M UTC") if p.last_write else "-"
        click.echo(f"{names[p.name]:<{width}}  {memories(p.memories, 8):<17}  last write {written}")


@profiles.command()
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask: delete it.")
@json_option
@click.pass_obj
def delete(obj: Context, name: str, yes: bool, as_json: bool) -> None:
    """Delete profile NAME: every memory in it, its feedback and its learned ranker."""
    from slm import validate
    from slm.profiles import delete as delete_profile

    obj.profile = validate.profile(name)
    with obj.memory(create=False) as memory:
        held = memory.count()
        if not yes:
            if not sys.stdin.isatty():
                raise InvalidInput(
                    f"deleting profile {name!r} forgets its {memories(held)}: "
                    "add --yes to confirm (nothing was deleted)"
                )
            click.confirm(
                f"Delete profile {name!r} and its {memories(held)}? This cannot be undone",
                abort=True,
            )
        forgotten = delete_profile(memory)
    done = {"deleted": {"profile": name, "forgotten": forgotten}}
    answer(done, f"deleted profile {name!r}: {memories(forgotten)} forgotten", as_json)
