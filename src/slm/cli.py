"""The ``slm`` command: a thin adapter from the shell to :class:`slm.Memory`.

Library errors become one line on stderr and a non-zero exit; ``--json`` puts machine
output (and only that) on stdout.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from slm import validate
from slm.contract import RecallResponse
from slm.engine import Memory
from slm.errors import NotFound, SlmError
from slm.models import MemoryRecord
from slm.settings import Settings, default_db_path

F = TypeVar("F", bound=Callable[..., Any])

EXIT_ERROR = 1
EXIT_INTERNAL = 70


class Context:
    def __init__(self, db: str | None, profile: str | None, dsn: str | None = None) -> None:
        self.db = db
        self.dsn = dsn
        self.profile = profile or os.environ.get("SLM_PROFILE") or "default"

    @contextmanager
    def memory(self, **overrides: Any) -> Iterator[Memory]:
        settings = Settings.from_env(**overrides)
        if self.dsn:
            store: dict[str, Any] = {"dsn": self.dsn}
        else:
            store = {"path": Path(self.db).expanduser() if self.db else default_db_path()}
        with Memory(**store, profile=self.profile, settings=settings) as memory:
            yield memory


class SlmGroup(click.Group):
    """Turns library errors into one-line messages; no traceback reaches the user."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SlmError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_ERROR)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)
        except BrokenPipeError:
            # The reader went away (`slm list | head`): stop quietly, and keep Python from
            # complaining about the unflushed output at exit.
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(EXIT_ERROR)
        except Exception as exc:
            if os.environ.get("SLM_DEBUG"):
                raise
            click.echo(
                f"internal error: {type(exc).__name__}: {exc} (set SLM_DEBUG=1 for details)",
                err=True,
            )
            sys.exit(EXIT_INTERNAL)


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")(
        func
    )


def emit(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def show_memory(record: MemoryRecord) -> None:
    click.echo(f"{record.id}  {record.content}")
    details = [f"event {record.event_time:%Y-%m-%d %H:%M}"]
    if record.source:
        details.append(f"source {record.source}")
    if record.tags:
        details.append("tags " + ",".join(record.tags))
    click.echo("                  " + "  ".join(details))


def show_response(response: RecallResponse) -> None:
    if response.abstained:
        click.echo(f"(no memory passes the evidence floor: {response.abstention_reason})")
        return
    for result in response.results:
        click.echo(
            f"{result.rank_position:>2}. [{result.relevance_score:.2f}] {result.memory.content}"
        )
        click.echo(
            f"      id {result.memory.id}  event {result.memory.event_time:%Y-%m-%d}"
            + (f"  source {result.memory.source}" if result.memory.source else "")
        )


@click.group(cls=SlmGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar="SLM_DB", help="SQLite file (env SLM_DB; default in SLM_HOME).")
@click.option(
    "--dsn",
    envvar="SLM_DSN",
    help="PostgreSQL DSN of a server store, used instead of --db (env SLM_DSN).",
)
@click.option("--profile", help="Profile name, [A-Za-z0-9_.-]{1,64} (env SLM_PROFILE).")
@click.version_option(package_name="slm")
@click.pass_context
def cli(ctx: click.Context, db: str | None, dsn: str | None, profile: str | None) -> None:
    """slm: local-first memory for AI agents. Store what matters; recall it ranked."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if profile is not None:
        validate.profile(profile)
    ctx.obj = Context(db, profile, dsn)


@cli.command()
@click.argument("text")
@click.option("--event-time", help="When it happened, ISO 8601 (default: now).")
@click.option("--source", help="Who or what said it (agent or user id).")
@click.option("--confidence", type=float, default=1.0, show_default=True, help="0..1.")
@click.option("--meta", help="Metadata as a JSON object.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@json_option
@click.pass_obj
def remember(
    obj: Context,
    text: str,
    event_time: str | None,
    source: str | None,
    confidence: float,
    meta: str | None,
    tags: tuple[str, ...],
    as_json: bool,
) -> None:
    """Store TEXT as a memory (identical text returns the existing memory)."""
    with obj.memory() as memory:
        record = memory.remember(
            text,
            event_time=event_time,
            source=source,
            confidence=confidence,
            metadata=meta,
            tags=tags,
        )
    if as_json:
        emit(record.to_dict())
    else:
        click.echo(f"remembered {record.id}")


@cli.command()
@click.argument("query")
@click.option("--k", "k", type=int, default=10, show_default=True, help="Results, 1..1000.")
@click.option("--trace", is_flag=True, help="Include the per-channel trace.")
@click.option("--channels", help="Comma-separated channels to run (default: all healthy).")
@click.option("--source", help="Only memories from this source.")
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag (repeatable).")
@click.option("--after", help="Only memories with event time at or after this ISO 8601 time.")
@click.option("--before", help="Only memories with event time before this ISO 8601 time.")
@click.option("--now", help="Anchor for relative time in the query, ISO 8601.")
@json_option
@click.pass_obj
def recall(
    obj: Context,
    query: str,
    k: int,
    trace: bool,
    channels: str | None,
    source: str | None,
    tags: tuple[str, ...],
    after: str | None,
    before: str | None,
    now: str | None,
    as_json: bool,
) -> None:
    """Recall the memories most relevant to QUERY."""
    with obj.memory() as memory:
        response = memory.recall(
            query,
            k=k,
            trace=trace,
            source=source,
            tags=tags,
            after=after,
            before=before,
            now=now,
            channels=channels.split(",") if channels is not None else None,
        )
    if as_json:
        emit(response.to_dict())
        return
    show_response(response)
    if trace and response.trace is not None:
        click.echo(json.dumps(response.trace, indent=2))


@cli.command()
@click.argument("memory_id")
@json_option
@click.pass_obj
def get(obj: Context, memory_id: str, as_json: bool) -> None:
    """Show one memory."""
    with obj.memory() as memory:
        record = memory.get(memory_id)
    if as_json:
        emit(record.to_dict())
    else:
        show_memory(record)


@cli.command(name="list")
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--offset", type=int, default=0, show_default=True)
@click.option("--source", help="Only memories from this source.")
@click.option("--tag", "tags", multiple=True, help="Only memories with this tag (repeatable).")
@json_option
@click.pass_obj
def list_(
    obj: Context, limit: int, offset: int, source: str | None, tags: tuple[str, ...], as_json: bool
) -> None:
    """List memories, most recently recorded first."""
    with obj.memory() as memory:
        records = memory.list(limit, offset, source=source, tags=tags)
    if as_json:
        emit([r.to_dict() for r in records])
    else:
        for record in records:
            show_memory(record)


@cli.command()
@click.argument("ids", nargs=-1, required=True)
@json_option
@click.pass_obj
def forget(obj: Context, ids: tuple[str, ...], as_json: bool) -> None:
    """Remove memories by id, from every index."""
    with obj.memory() as memory:
        removed = memory.forget(ids)
    missing = [i for i in dict.fromkeys(ids) if i not in removed]
    if as_json:
        emit({"forgotten": removed, "not_found": missing})
    else:
        click.echo(f"forgot {len(removed)} memor{'y' if len(removed) == 1 else 'ies'}")
    if missing:
        raise NotFound(f"not found in this profile: {', '.join(missing)}")


@cli.command(name="import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@json_option
@click.pass_obj
def import_(obj: Context, file: Path, as_json: bool) -> None:
    """Store every memory of a JSON Lines FILE (validated first; re-runs store nothing twice)."""
    from slm.transfer import check_jsonl, import_jsonl

    with obj.memory() as memory:
        total = check_jsonl(memory, file)
        if sys.stderr.isatty() and not as_json:
            with click.progressbar(length=total, label="importing", file=sys.stderr) as bar:
                report = import_jsonl(memory, file, progress=bar.update)
        else:
            report = import_jsonl(memory, file)
    if as_json:
        emit({"read": report.read, "stored": report.stored, "existing": report.existing})
    else:
        click.echo(f"read {report.read}, stored {report.stored}, already present {report.existing}")


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@json_option
@click.pass_obj
def export(obj: Context, file: Path, as_json: bool) -> None:
    """Write every memory of the profile to a JSON Lines FILE ('-' for stdout)."""
    from slm.transfer import export_jsonl

    with obj.memory() as memory:
        if str(file) == "-":
            count = export_jsonl(memory, sys.stdout)
            return
        tmp = file.with_name(file.name + ".partial")
        try:
            with open(tmp, "w", encoding="utf-8") as handle:
                count = export_jsonl(memory, handle)
            tmp.replace(file)
        except OSError as exc:
            raise click.ClickException(f"cannot write {file}: {exc.strerror}") from None
    if as_json:
        emit({"exported": count, "file": str(file)})
    else:
        click.echo(f"exported {count} memories to {file}")


@cli.command()
@click.argument("memory_id")
@click.option("--useful/--not-useful", required=True, help="Was this memory useful?")
@json_option
@click.pass_obj
def feedback(obj: Context, memory_id: str, useful: bool, as_json: bool) -> None:
    """Record whether a memory was useful; this updates its source's trust_score."""
    with obj.memory() as memory:
        trust = memory.feedback(memory_id, useful=useful)
    if as_json:
        emit({"id": memory_id, "useful": useful, "source_trust": trust})
    else:
        click.echo(f"source trust is now {trust:.3f}")


@cli.command()
@json_option
@click.pass_obj
def health(obj: Context, as_json: bool) -> None:
    """Report store, embedder and channel health."""
    with obj.memory() as memory:
        report = memory.health()
    if as_json:
        emit(report)
        return
    click.echo(f"profile {report['profile']}: {report['memories']} memories")
    click.echo(f"store    {report['store']['kind']} {report['store']['location']}")
    click.echo(f"embedder {report['embedder']['name']} healthy={report['embedder']['healthy']}")
    for name, state in report["channels"].items():
        status = "ok" if state["healthy"] else f"unhealthy ({state['reason']})"
        click.echo(f"  {name:<10} {status}")


@cli.command()
@click.argument("query")
@click.option("--k", "k", type=int, default=10, show_default=True, help="Results, 1..1000.")
@click.option("--channels", help="Comma-separated channels to run (default: all healthy).")
@click.option("--now", help="Anchor for relative time in the query, ISO 8601.")
@json_option
@click.pass_obj
def trace(
    obj: Context, query: str, k: int, channels: str | None, now: str | None, as_json: bool
) -> None:
    """Explain a recall: what each channel found, how it was fused, why each result is there."""
    with obj.memory() as memory:
        response = memory.recall(
            query,
            k=k,
            trace=True,
            now=now,
            channels=channels.split(",") if channels is not None else None,
        )
    if as_json:
        emit(response.to_dict())
        return
    assert response.trace is not None
    show_trace(response)


def show_trace(response: RecallResponse) -> None:
    trace: dict[str, Any] = dict(response.trace or {})
    query = trace["query"]
    click.echo(f"query    {query['text']!r}")
    click.echo(f"terms    {' '.join(query['terms']) or '-'}")
    click.echo(f"entities {', '.join(query['entities']) or '-'}")
    window = query["time_window"]
    when = f"{window['start'][:10]} .. {window['end'][:10]} ({window['text']})" if window else "-"
    click.echo(f"window   {when}" + ("   [when-question]" if query["when_question"] else ""))
    fusion = trace["fusion"]
    weights = ", ".join(f"{n} {w:g}" for n, w in fusion["weights"].items())
    click.echo(f"fusion   weighted RRF, k={fusion['k']:g}; weights {weights}\n")
    contents = {r.memory.id: r.memory.content for r in response.results}
    for name, run in trace["channels"].items():
        if not run["ran"]:
            why = run["error"] or run["reason"]
            click.echo(f"{name:<10} did not run ({why})")
            continue
        click.echo(f"{name:<10} {len(run['candidates'])} candidates in {run['ms']:.1f} ms")
        for hit in run["candidates"][:5]:
            text = contents.get(hit["id"], "")
            click.echo(f"    #{hit['rank']:<3} {hit['score']:>10.4f}  {hit['id']}  {text[:60]}")
    click.echo()
    if response.abstained:
        click.echo(f"abstained: {response.abstention_reason}")
    for result, detail in zip(response.results, trace["results"], strict=True):
        ranks = ", ".join(f"{n} #{c['rank']}" for n, c in detail["channels"].items())
        click.echo(
            f"{result.rank_position:>2}. [{result.relevance_score:.2f}] {result.memory.content}"
        )
        click.echo(
            f"      {detail['evidence']}; cos {detail['cosine']:.2f}, "
            f"lexical {detail['lexical_coverage']:.2f}, window {detail['time_window_match']}; "
            f"boost {detail['entity_graph_boost']:.4f}, role {detail['role_boost']:.4f}; {ranks}"
        )
    click.echo(f"\n{trace['total_ms']:.1f} ms")


@cli.command()
@json_option
@click.pass_obj
def reindex(obj: Context, as_json: bool) -> None:
    """Rebuild the derived indexes (lexical, entities, dates, graph) from the stored memories."""
    with obj.memory() as memory:
        count = memory.reindex()
    if as_json:
        emit({"reindexed": count})
    else:
        click.echo(f"reindexed {count} memories")


@cli.command()
@click.option("--from", "source", required=True, help="Store to copy: a file or postgresql:// URL.")
@click.option("--to", "target", required=True, help="Store to copy into (created if new).")
@json_option
@click.pass_context
def migrate(ctx: click.Context, source: str, target: str, as_json: bool) -> None:
    """Copy every memory (ids, times, metadata, vectors, trust) to another store; re-run
    to resume. With --profile (or SLM_PROFILE), only that profile."""
    from slm.migrate import migrate as copy_store

    obj: Context = ctx.obj
    chosen = ctx.parent is not None and ctx.parent.params.get("profile") is not None
    profiles = [obj.profile] if chosen or os.environ.get("SLM_PROFILE") else None
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


@cli.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
@json_option
@click.pass_obj
def backup(obj: Context, path: Path, force: bool, as_json: bool) -> None:
    """Copy the whole store (every profile) to the file PATH while it stays in use."""
    from slm.backup import backup as copy_store

    with obj.memory() as memory:
        report = copy_store(memory, path, overwrite=force)
    if as_json:
        emit({"file": report.path, "memories": report.memories, "bytes": report.bytes})
    else:
        click.echo(f"backed up {report.memories} memories to {report.path}")


@cli.command()
@json_option
@click.pass_context
def demo(ctx: click.Context, as_json: bool) -> None:
    """Store a short built-in conversation (profile 'demo') and show a few recalls."""
    from slm.demo import QUESTIONS, conversation

    obj: Context = ctx.obj
    if ctx.parent is not None and ctx.parent.params.get("profile") is None:
        obj.profile = "demo"
    answers = []
    with obj.memory() as memory:
        stored = memory.remember_many(conversation())
        if not as_json:
            click.echo(f"Stored {len(stored)} memories of a conversation between Maya and Sam")
            click.echo(f"in {memory.store.location} (profile {memory.profile!r}).\n")
        for question in QUESTIONS:
            response = memory.recall(question, k=3)
            answers.append(response.to_dict())
            if not as_json:
                click.echo(click.style(f"? {question}", bold=True))
                show_response(response)
                click.echo()
    if as_json:
        emit(answers)


@cli.command()
@click.pass_obj
def mcp(obj: Context) -> None:
    """Serve the profile's memory to MCP clients (Claude Code, Cursor...) over stdio."""
    from slm.mcp_server import run_stdio

    with obj.memory() as memory:
        run_stdio(memory)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.pass_obj
def serve(obj: Context, host: str, port: int) -> None:
    """Serve the REST API; a non-loopback --host needs SLM_API_TOKEN."""
    from slm.http import serve as serve_http

    path = None if obj.dsn else Path(obj.db).expanduser() if obj.db else default_db_path()
    token = os.environ.get("SLM_API_TOKEN")
    serve_http(
        host=host, port=port, path=path, dsn=obj.dsn, default_profile=obj.profile, token=token
    )


from slm.bench.cli import bench  # noqa: E402  (registered after the commands above)

cli.add_command(bench)


def main() -> None:
    cli(prog_name="slm")
