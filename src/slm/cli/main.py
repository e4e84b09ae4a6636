"""The ``slm`` command: a thin adapter from the shell to :class:`slm.Memory`.

Library errors become one line on stderr and a non-zero exit; ``--json`` puts machine
output (and only that) on stdout.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from slm import validate
from slm.cli.base import (
    Context,
    SlmGroup,
    filter_options,
    json_option,
    owner_of,
    owner_options,
    recall_options,
    stacked,
    where_filter,
)
from slm.cli.calibrate import calibrate_command
from slm.cli.demo import demo
from slm.cli.output import (
    answer,
    emit,
    memories,
    passages_read,
    remembered,
    show_details,
    show_history,
    show_memory,
    show_response,
    show_trace,
)
from slm.cli.profiles import profiles
from slm.cli.servers import mcp, serve, ui
from slm.cli.setup import setup
from slm.cli.transfer import export, import_
from slm.cli.upkeep import backup, migrate, reindex
from slm.contract import RecallResponse
from slm.engine import Memory, MemoryInput
from slm.errors import DISTRIBUTION, InvalidInput
from slm.models import RecallRequest


@click.group(cls=SlmGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar="SLM_DB", help="SQLite file (env SLM_DB; default in SLM_HOME).")
@click.option(
    "--dsn",
    envvar="SLM_DSN",
    help="PostgreSQL DSN of a server store, used instead of --db (env SLM_DSN).",
)
@click.option("--profile", help="Profile name, [A-Za-z0-9_.-]{1,64} (env SLM_PROFILE).")
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False),
    help="Calibration artefact for answer_confidence (env SLM_CALIBRATION; 'slm calibrate').",
)
@click.version_option(package_name=DISTRIBUTION)
@click.pass_context
def cli(
    ctx: click.Context,
    db: str | None,
    dsn: str | None,
    profile: str | None,
    calibration: str | None,
) -> None:
    """slm: local-first memory for AI agents. Store what matters; recall it ranked."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if profile is not None:
        validate.profile(profile)
    ctx.obj = Context(db, profile, dsn, calibration)


@cli.command()
@click.argument("text")
@click.option("--event-time", help="When it happened, ISO 8601 (default: now).")
@click.option("--source", help="Who or what said it (agent or user id).")
@click.option("--confidence", type=float, default=1.0, show_default=True, help="0..1.")
@click.option("--meta", "metadata", help="Metadata as a JSON object.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option(
    "--supersedes", multiple=True, metavar="ID", help="A memory this one replaces (repeatable)."
)
@click.option("--valid-from", help="When it starts to hold, ISO 8601 (default: event time).")
@owner_options
@json_option
@click.pass_obj
def remember(obj: Context, /, text: str, as_json: bool, **fields: Any) -> None:
    """Store TEXT as a memory ('-' reads it from standard input); identical text is stored
    once, and the command says so."""
    if text == "-":
        text = sys.stdin.read()
    with obj.memory() as memory:
        size = len(text.encode("utf-8", "replace"))
        if size <= LONG_TEXT_BYTES or size > validate.MAX_CONTENT_BYTES:  # quick, or refused
            done = memory.remember(text, **fields)
        else:  # checked before the progress starts, so a refusal is one line
            memory.validate_item(item := MemoryInput(text, **fields))
            with passages_read(memory, size):
                done = memory.store_many([item])[0]
    answer(done.to_dict(), remembered(done), as_json)


@cli.command()
@click.argument("memory_id")
@click.argument("text")
@click.option("--event-time", help="When the change happened, ISO 8601 (default: now).")
@click.option("--source", help="Who or what said it (default: the old memory's).")
@click.option("--confidence", type=float, help="0..1 (default: the old memory's).")
@click.option("--meta", "metadata", help="Metadata as a JSON object (default: the old memory's).")
@click.option("--tag", "tags", multiple=True, help="A tag, repeatable (default: the old ones).")
@click.option("--valid-from", help="When it starts to hold, ISO 8601 (default: event time).")
@json_option
@click.pass_obj
def update(
    obj: Context, /, memory_id: str, text: str, tags: tuple[str, ...], as_json: bool, **fields: Any
) -> None:
    """Replace memory MEMORY_ID with TEXT ('-' reads standard input): TEXT is stored as a new
    memory that supersedes the old one, which stays readable but leaves recall."""
    if text == "-":
        text = sys.stdin.read()
    with obj.memory(create=False) as memory:
        done = memory.update(memory_id, text, tags=tags or None, **fields)
    answer(done.to_dict(), remembered(done), as_json)


def recall_filters(func: Any) -> Any:
    """What narrows a recall (``slm recall`` and ``slm trace``): filters, times, versions,
    a minimum relevance and the owner."""
    return stacked(
        func,
        filter_options,
        click.option(
            "--after", help="Only memories with event time at or after this ISO 8601 time."
        ),
        click.option("--before", help="Only memories with event time before this ISO 8601 time."),
        click.option("--include-superseded", is_flag=True, help="Also return superseded memories."),
        click.option("--as-of", help="Answer with the memories that held at this ISO 8601 time."),
        click.option(
            "--min-relevance", type=float, help="Leave out results below this relevance, 0..1."
        ),
        owner_options,
    )


def _question(query: str) -> str:
    """QUERY, or for ``-`` the question on standard input."""
    return sys.stdin.read().strip() if query == "-" else query


@cli.command()
@click.argument("query")
@recall_options
@click.option("--trace", is_flag=True, help="Include the per-channel trace.")
@recall_filters
@json_option
@click.pass_obj
def recall(
    obj: Context, /, query: str, where: tuple[str, ...], as_json: bool, **options: Any
) -> None:
    """Recall the memories most relevant to QUERY ('-' reads it from standard input): what
    holds now, unless --as-of or --include-superseded; --user answers from one user's."""
    with obj.memory(create=False, calibrated=True) as memory:
        request = RecallRequest(_question(query), metadata=where_filter(where), **options)
        response = memory.recall_request(request)
        contents = _trace_contents(memory, response) if request.trace and not as_json else {}
    if as_json:
        emit(response.to_dict())
    elif request.trace:
        show_trace(response, contents)
    else:
        show_response(response, request.min_relevance)


@cli.command()
@click.argument("memory_id")
@json_option
@click.pass_obj
def get(obj: Context, memory_id: str, as_json: bool) -> None:
    """Show one memory: its text, times, source, confidence, trust, tags and metadata."""
    with obj.memory(create=False) as memory:
        record = memory.get(memory_id)
        trust = memory.source_trust(record.source)
    if as_json:
        emit(record.to_dict())
    else:
        show_details(record, trust)


@cli.command(name="list")
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--offset", type=int, default=0, show_default=True)
@filter_options
@owner_options
@json_option
@click.pass_obj
def list_(
    obj: Context,
    /,
    limit: int,
    offset: int,
    source: str | None,
    tags: tuple[str, ...],
    where: tuple[str, ...],
    as_json: bool,
    **options: Any,
) -> None:
    """List memories, most recently recorded first (--user: one user's)."""
    owner = owner_of(options)
    with obj.memory(create=False) as memory:
        records = memory.list(
            limit, offset, source=source, tags=tags, metadata=where_filter(where), **owner
        )
    if as_json:
        emit({"memories": [r.to_dict() for r in records]})
    elif not records:
        filtered = source is not None or tags or where or any(v is not None for v in owner.values())
        chosen = " matching these filters" if filtered else ""
        past = f" past the first {offset}" if offset else ""
        click.echo(f"no memories{chosen}{past} in profile {obj.profile!r}")
    else:
        for record in records:
            show_memory(record)


@cli.command()
@click.argument("ids", nargs=-1)
@owner_options
@click.option(
    "--where",
    "where",
    multiple=True,
    metavar="KEY=VALUE",
    help="Forget the memories whose metadata KEY is VALUE (as list --where reads it).",
)
@click.option("--all", "everything", is_flag=True, help="Forget every memory of the profile.")
@click.option("--dry-run", is_flag=True, help="Only count what would be forgotten.")
@click.option("--yes", is_flag=True, help="Forget by owner or filter without asking first.")
@json_option
@click.pass_obj
def forget(
    obj: Context,
    /,
    ids: tuple[str, ...],
    where: tuple[str, ...],
    everything: bool,
    dry_run: bool,
    yes: bool,
    as_json: bool,
    **options: Any,
) -> None:
    """Remove memories, from every index: by id (all of them, or none when one is unknown),
    or every memory of an owner (--user alice) or filter (--where), or --all of them.
    Forgetting by owner or filter counts first and asks (--yes does not; --dry-run only
    counts)."""
    owner = owner_of(options)
    chosen = where_filter(where)
    with obj.memory(create=False) as memory:
        if ids:
            removed = memory.forget(ids, metadata=chosen, all=everything, dry_run=dry_run, **owner)
            done = {"would_forget" if dry_run else "forgotten": removed, "not_found": []}
            verb = "would forget" if dry_run else "forgot"
            answer(done, f"{verb} {memories(len(removed))}", as_json)
            return
        would = memory.forget(metadata=chosen, all=everything, dry_run=True, **owner)
        if dry_run:
            counted = {"dry_run": True, "count": len(would), "ids": would}
            answer(counted, f"would forget {memories(len(would))}", as_json)
            return
        if would and not yes:
            if not sys.stdin.isatty():
                raise InvalidInput(
                    f"this forgets {memories(len(would))}: say --yes to go ahead (--dry-run "
                    "counts them); nothing was forgotten",
                    field="yes",
                )
            click.confirm(f"forget {memories(len(would))}?", abort=True, err=True)
        removed = memory.forget(metadata=chosen, all=everything, **owner)
    answer(
        {"forgotten": removed, "count": len(removed)}, f"forgot {memories(len(removed))}", as_json
    )


@cli.command()
@click.argument("memory_id")
@json_option
@click.pass_obj
def history(obj: Context, memory_id: str, as_json: bool) -> None:
    """What memory MEMORY_ID replaced and what replaced it, when, and whether each link was
    stated (update, --supersedes) or probable; and the version that holds now."""
    with obj.memory(create=False) as memory:
        told = memory.history(memory_id)
    if as_json:
        emit(told.to_dict())
    else:
        show_history(told)


@cli.command()
@click.argument("older_id")
@click.argument("newer_id")
@json_option
@click.pass_obj
def unlink(obj: Context, older_id: str, newer_id: str, as_json: bool) -> None:
    """Undo a link: NEWER_ID does not replace OLDER_ID (the older one holds again)."""
    with obj.memory(create=False) as memory:
        memory.unlink(older_id, newer_id)
    done = {"unlinked": {"older": older_id, "newer": newer_id}}
    answer(done, f"{newer_id} no longer replaces {older_id}", as_json)


#: A text this long takes seconds to store (each of its passages is embedded):
#: ``slm remember`` shows on stderr how far it got.
LONG_TEXT_BYTES = 64 * 1024


@cli.command()
@click.argument("memory_id", required=False)
@click.option("--useful/--not-useful", default=None, help="Was this memory useful?")
@click.option("--query", "query_id", help="The query_id of the recall it was useful for.")
@click.option("--list", "listing", is_flag=True, help="List this profile's feedback.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--reset", is_flag=True, help="Forget all feedback and the learned ranker.")
@json_option
@click.pass_obj
def feedback(
    obj: Context,
    memory_id: str | None,
    useful: bool | None,
    query_id: str | None,
    listing: bool,
    limit: int,
    reset: bool,
    as_json: bool,
) -> None:
    """Record whether a memory was useful (for the recall --query names), list feedback
    (--list) or forget it (--reset). Feedback updates the source's trust_score and, with
    the reranker and learning on, trains this profile's ranker (docs/learning.md)."""
    if sum([memory_id is not None, listing, reset]) != 1:
        raise click.UsageError("give a MEMORY_ID with --useful/--not-useful, or --list, or --reset")
    with obj.memory(create=False) as memory:
        if reset:
            count = memory.reset_feedback()
            line = f"forgot {count} feedback events and the learned ranker"
            answer({"forgotten": count}, line, as_json)
            return
        if listing:
            events = [e.to_dict() for e in memory.feedback_events(limit)]
            if as_json:
                emit({"feedback": events})
                return
            for e in events:
                mark = "useful" if e["useful"] else "not useful"
                click.echo(f"{e['at']}  {e['memory_id']}  {mark}  {e['query_id'] or '-'}")
            return
        if useful is None:
            raise click.UsageError("say --useful or --not-useful")
        assert memory_id is not None
        report = memory.feedback_report(memory_id, useful=useful, query_id=query_id)
    if as_json:
        emit(report)
        return
    ranking = report["ranking"]
    click.echo(f"source trust is now {report['source_trust']:.3f}")
    if ranking["rerank"]:
        click.echo(f"ranking model {ranking['model']} ({ranking['origin']})")


@cli.command()
@json_option
@click.pass_obj
def health(obj: Context, as_json: bool) -> None:
    """Report store, embedder and channel health."""
    with obj.memory(create=False, calibrated=True) as memory:
        report = memory.health()
    if as_json:
        emit(report)
        return
    click.echo(f"profile {report['profile']}: {memories(report['memories'])}")
    click.echo(f"store    {report['store']['kind']} {report['store']['location']}")
    click.echo(f"embedder {report['embedder']['name']} healthy={report['embedder']['healthy']}")
    for name, state in report["channels"].items():
        status = "ok" if state["healthy"] else f"unhealthy ({state['reason']})"
        click.echo(f"  {name:<10} {status}")
    ranking = report["ranking"]
    if ranking["rerank"]:
        learning = "on" if ranking["learning"] else "off"
        click.echo(f"ranking  {ranking['model']} ({ranking['origin']}), learning {learning}")
    else:
        click.echo("ranking  fused order (reranker off)")
    calibration = report["calibration"]
    if calibration["status"] == "calibrated":
        held = calibration["heldout"]
        click.echo(
            f"calibration {calibration['calibration_id']} (k={calibration['k']}; held out: "
            f"n {held['n']}, ECE {held['ece']})"
        )
    else:
        click.echo("calibration none (answer_confidence is null)")


@cli.command()
@click.argument("query")
@recall_options
@recall_filters
@json_option
@click.pass_obj
def trace(
    obj: Context, /, query: str, where: tuple[str, ...], as_json: bool, **options: Any
) -> None:
    """Explain a recall ('-' reads QUERY from standard input): what each channel found, how
    it was fused, why each result is there. It takes recall's filters."""
    with obj.memory(create=False, calibrated=True) as memory:
        request = RecallRequest(
            _question(query), trace=True, metadata=where_filter(where), **options
        )
        response = memory.recall_request(request)
        contents = {} if as_json else _trace_contents(memory, response)
    if as_json:
        emit(response.to_dict())
    else:
        show_trace(response, contents)


def _trace_contents(memory: Memory, response: RecallResponse) -> dict[str, str]:
    """The text of every memory a traced recall mentions (results and channel hits)."""
    runs = (response.trace or {}).get("channels", {}).values()
    ids = {hit["id"] for run in runs for hit in run["candidates"][:5] if hit["id"]}
    found = {r.memory.id: r.memory.content for r in response.results}
    missing = [i for i in ids if i not in found]
    found.update((r.id, r.content) for r in memory.get_many(missing))
    return found


cli.add_command(calibrate_command)
cli.add_command(profiles)
cli.add_command(demo)
for _upkeep in (reindex, migrate, backup):
    cli.add_command(_upkeep)
for _transfer in (import_, export):
    cli.add_command(_transfer)
for _server in (mcp, serve, ui, setup):
    cli.add_command(_server)


def _store_option(name: str, help: str) -> click.Option:
    """``--db``, ``--dsn`` or ``--profile`` after the command name, as people type them
    (``slm serve --profile team``); given there, it overrides the one before it."""

    def late(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if value is None:
            return
        obj = ctx.find_object(Context)
        assert obj is not None
        if name == "profile":
            obj.profile = validate.profile(value)
            obj.profile_flag = True
        elif name == "db":
            obj.db, obj.dsn = value, None
        else:
            obj.dsn = value

    return click.Option([f"--{name}"], expose_value=False, callback=late, help=help)


for _command in cli.commands.values():
    _command.params += [
        _store_option("db", "SQLite file (also accepted before the command)."),
        _store_option("dsn", "PostgreSQL DSN (also accepted before the command)."),
        _store_option("profile", "Profile name (also accepted before the command)."),
    ]


class _Benchmarks(click.Group):
    """``slm bench``: its commands live in the ``slm_bench`` package, imported only when
    ``slm bench`` runs, so the library and the other commands never load it."""

    def _commands(self) -> click.Group:
        from slm_bench.cli import bench

        return bench

    def list_commands(self, ctx: click.Context) -> list[str]:
        return self._commands().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._commands().get_command(ctx, cmd_name)


@cli.group(cls=_Benchmarks)
def bench() -> None:
    """Measure retrieval quality and speed with the benchmarks that ship with slm."""


def main() -> None:
    cli(prog_name="slm")
