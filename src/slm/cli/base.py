"""The parts every ``slm`` command shares: where its store is (:class:`Context`), how a
failure reaches the user (:class:`SlmGroup`: one line on stderr and an exit status), and
the options several commands take."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from slm import validate
from slm.cli.output import printable
from slm.engine import Memory
from slm.errors import InvalidInput, NotFound, SlmError, outcome
from slm.settings import Settings, default_db_path
from slm.store import Location

F = TypeVar("F", bound=Callable[..., Any])

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 70


class Context:
    """Where the command's store is: set by the global options, before or after the command."""

    def __init__(
        self,
        db: str | None,
        profile: str | None,
        dsn: str | None = None,
        calibration: str | None = None,
    ) -> None:
        self.db = db
        self.dsn = dsn
        #: a calibration artefact (--calibration), over SLM_CALIBRATION
        self.calibration = calibration
        #: whether --profile was given (SLM_PROFILE alone does not count)
        self.profile_flag = profile is not None
        self.profile = profile or os.environ.get("SLM_PROFILE") or "default"

    @contextmanager
    def memory(
        self,
        *,
        create: bool = True,
        calibrated: bool = False,
        whole_store: bool = False,
        **overrides: Any,
    ) -> Iterator[Memory]:
        """The store, opened for the command. A command that only reads (``create=False``)
        refuses a SQLite file that does not exist instead of creating an empty one; one that
        writes creates it, but not a directory named with ``--db`` that does not exist.
        Only a command that recalls (``calibrated``) loads the calibration artefact, so a
        stale one never stops a write. A command that only reads one profile refuses a
        profile that holds nothing while others do (a typo), naming them; one about the
        ``whole_store`` does not."""
        if not calibrated:
            overrides["calibration"] = None
        settings = self.settings(**overrides)
        location = self.location()
        if not location.exists():
            path = location.path
            assert path is not None
            if not create:
                raise NotFound(
                    f"no store at {path}: commands that only read never create one "
                    "(store something first with 'slm remember', or check --db / SLM_DB)"
                )
            if self.db and not path.parent.is_dir():
                raise InvalidInput(
                    f"the directory {path.parent} does not exist (--db names a file in an "
                    "existing directory)",
                    field="db",
                )
        with Memory(location, profile=self.profile, settings=settings) as memory:
            if not create and not whole_store:
                from slm.profiles import require

                require(memory)
            yield memory

    def settings(self, **overrides: Any) -> Settings:
        """The settings from the environment, with --calibration and ``overrides``."""
        if self.calibration is not None:
            overrides.setdefault("calibration", self.calibration)
        return Settings.from_env(**overrides)

    def location(self) -> Location:
        """The store the options name: ``--dsn``, else ``--db``, else the default file."""
        if self.dsn:
            return Location(dsn=self.dsn)
        return Location(path=Path(self.db).expanduser() if self.db else default_db_path())


#: Commands people coming from other memory tools type, and what slm calls them.
COMMAND_HINTS = {"search": "recall", "add": "remember", "delete": "forget"}


class SlmGroup(click.Group):
    """Turns every failure into one line on stderr, ``error: ...``: exit status 2 for a usage
    error (an unknown option, a value of the wrong type), 1 for anything else; no traceback
    and no usage block reach the user. A command another tool's name for one of slm's
    (``search``) is pointed to it."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else None
        if name in COMMAND_HINTS and self.get_command(ctx, name) is None:
            ours = COMMAND_HINTS[name]
            raise click.UsageError(f"no command {name!r}: slm calls it '{ours}'", ctx)
        return super().resolve_command(ctx, args)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        run = super().main
        if not standalone_mode:
            return run(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = run(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "slm"
            message = printable(exc.format_message())
            click.echo(f"error: {message} (see '{command} --help')", err=True)
            sys.exit(EXIT_USAGE)
        except click.ClickException as exc:
            click.echo(f"error: {printable(exc.format_message())}", err=True)
            sys.exit(EXIT_ERROR)
        except click.Abort:
            click.echo("interrupted", err=True)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SlmError as exc:
            click.echo(f"error: {printable(str(exc))}", err=True)
            sys.exit(outcome(exc).exit_code)
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
                f"internal error: {type(exc).__name__}: {printable(str(exc))} "
                "(set SLM_DEBUG=1 for details)",
                err=True,
            )
            sys.exit(EXIT_INTERNAL)


def quiet_option(func: F) -> F:
    return click.option("--quiet", is_flag=True, help="No progress on stderr.")(func)


@contextmanager
def readable(file: Path) -> Iterator[Path]:
    """``file``, or for ``-`` a temporary copy of standard input (read twice: checked, then
    stored)."""
    if str(file) != "-":
        yield file
        return
    from slm.copy.jsonl import bounded_lines

    with tempfile.TemporaryDirectory(prefix="slm-stdin-") as folder:
        copy = Path(folder) / "stdin.jsonl"
        with open(copy, "w", encoding="utf-8") as handle:
            handle.writelines(bounded_lines(sys.stdin))  # an endless line is refused, not kept
        yield copy


def filter_options(func: F) -> F:
    """The filters of the commands that recall or list: source, tags and metadata."""
    return stacked(
        func,
        click.option("--source", help="Only memories from this source."),
        click.option(
            "--tag", "tags", multiple=True, help="Only memories with this tag (repeatable)."
        ),
        click.option(
            "--where",
            "where",
            multiple=True,
            metavar="KEY=VALUE",
            help="Only memories whose metadata KEY is VALUE (JSON, else text); repeat a key "
            "to allow several values, repeat the option for several keys.",
        ),
    )


def where_filter(pairs: Sequence[str]) -> dict[str, list[Any]] | None:
    """``--where`` options as a metadata filter; a value that parses as JSON is read as JSON
    (``session=3`` is the number 3, ``name=Ana`` the text)."""
    if not pairs:
        return None
    chosen: dict[str, list[Any]] = {}
    for pair in pairs:
        key, sign, text = pair.partition("=")
        if not sign or not key.strip():
            raise InvalidInput(f"--where {pair!r}: write KEY=VALUE", field="where")
        if validate.json_depth(text) > validate.MAX_JSON_DEPTH:
            raise InvalidInput(
                f"--where {key.strip()}: the value nests more than {validate.MAX_JSON_DEPTH} deep",
                field="where",
            )
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        chosen.setdefault(key.strip(), []).append(value)
    return chosen


def owner_options(func: F) -> F:
    """Whose memories a command stores, reads or forgets: ``--user``, ``--agent``, ``--run``
    and ``--scope KEY=VALUE`` for the store's other scope keys (docs/scopes.md). The command
    receives them as ``owner``, the library's keyword arguments."""
    return stacked(
        func,
        click.option("--user", "user_id", metavar="ID", help="The user's (user_id)."),
        click.option("--agent", "agent_id", metavar="ID", help="The agent's (agent_id)."),
        click.option("--run", "run_id", metavar="ID", help="The run's (run_id)."),
        click.option(
            "--scope",
            "scope",
            multiple=True,
            metavar="KEY=VALUE",
            callback=_scope_pairs,
            help="A value of another scope key of the store (repeatable), e.g. tenant=acme.",
        ),
    )


def _scope_pairs(ctx: click.Context, param: click.Parameter, value: Sequence[str]) -> Any:
    """``--scope`` options as an object (None: none given); values are text."""
    if not value:
        return None
    chosen: dict[str, str] = {}
    for pair in value:
        key, sign, text = pair.partition("=")
        if not sign or not key.strip():
            raise InvalidInput(f"--scope {pair!r}: write KEY=VALUE", field="scope")
        chosen[key.strip()] = text
    return chosen


def owner_of(options: dict[str, Any]) -> dict[str, Any]:
    """The owner options taken out of a command's ``options``, as keyword arguments."""
    return {name: options.pop(name) for name in ("user_id", "agent_id", "run_id", "scope")}


def recall_options(func: F) -> F:
    """The options of the commands that recall: how many results, which channels run, and
    the moment relative times in the question are read against."""
    return stacked(
        func,
        click.option(
            "-k", "--k", "k", type=int, default=10, show_default=True, help="Results, 1..1000."
        ),
        click.option(
            "--channels",
            callback=_channel_list,
            help="Comma-separated channels to run (default: all healthy).",
        ),
        click.option("--now", help="Anchor for relative time in the query, ISO 8601."),
    )


def _channel_list(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """``--channels`` as the list of names it gives (None: not given)."""
    return value.split(",") if value is not None else None


def stacked(func: F, *options: Callable[[F], F]) -> F:
    """``func`` with ``options``, listed in its help in the order given."""
    for option in reversed(options):
        func = option(func)
    return func


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")(
        func
    )
