"""``slm bench``: the benchmark commands (thin layers over ``slm_bench.locomo`` and
``slm_bench.scale``)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click

from slm.channels import names as channel_names
from slm.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


def _emit(
    report: dict[str, Any], out: Path | None, as_json: bool, markdown: Callable[[Any], str]
) -> None:
    """Write the report to ``out`` if given; print it as JSON or as the summary."""
    if out is not None:
        out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    click.echo(json.dumps(report, indent=2) if as_json else markdown(report))


def _progress(quiet: bool) -> Callable[[str], None]:
    """Where a harness reports progress: stderr, or nowhere with ``--quiet``."""

    def progress(line: str) -> None:
        if not quiet:
            click.echo(line, err=True)

    return progress


@click.group()
def bench() -> None:
    """Measure retrieval quality and speed with the benchmarks that ship with slm."""


_OUT = click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the JSON here."
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print the JSON report on stdout.")
_QUIET = click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
_ABLATE = click.option(
    "--ablate", is_flag=True, help="Also run with each channel switched off in turn."
)
_CHANNELS = click.option("--channels", help="Comma-separated channels (default: all).")
_RERANK = click.option(
    "--rerank", is_flag=True, help="Rerank with the shipped model (docs/learning.md)."
)
_QUESTIONS = click.option(
    "--questions", type=click.IntRange(1), help="Only the first N questions of each."
)


def _quality_options(data_help: str, unit: str) -> Callable[[F], F]:
    """The options the retrieval-quality commands share; ``unit`` names what the data set
    holds several of (conversations, instances)."""
    data = click.option(
        "--data",
        "data",
        required=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help=data_help,
    )
    dsn = click.option(
        "--dsn", envvar="SLM_DSN", help=f"Run on PostgreSQL (one profile per {unit})."
    )
    first = click.option(f"--{unit}s", type=click.IntRange(1), help=f"Only the first N {unit}s.")

    def decorate(command: F) -> F:
        options = [data, _OUT, _JSON, _QUIET, _ABLATE, _CHANNELS, dsn, first, _QUESTIONS, _RERANK]
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def _quality(
    name: str,
    data: Path,
    out: Path | None,
    as_json: bool,
    quiet: bool,
    channels: str | None,
    rerank: bool,
    **run: Any,
) -> None:
    """Run the ``slm_bench.<name>`` harness with the shared options and emit its report."""
    harness = importlib.import_module(f"slm_bench.{name}")
    chosen = channel_names(channels, "--channels") if channels else None
    settings = Settings.from_env(calibration=None)
    settings = replace(settings, rerank=True) if rerank else settings
    report = harness.run(data, settings=settings, channels=chosen, progress=_progress(quiet), **run)
    limits = {k: v for k, v in run.items() if k not in ("dsn", "ablate")}
    options = {"--channels": channels, **{f"--{k}": v for k, v in limits.items()}}
    command = [f"slm bench {name} --data {data}", *(f"{k} {v}" for k, v in options.items() if v)]
    flags = (["--ablate"] if run["ablate"] else []) + (["--rerank"] if rerank else [])
    report["command"] = " ".join(command + flags)
    report["rerank"] = settings.rerank
    _emit(report, out, as_json, harness.markdown)


@bench.command()
@_quality_options("A LoCoMo JSON file (the original layout).", "conversation")
def locomo(
    data: Path,
    out: Path | None,
    as_json: bool,
    quiet: bool,
    ablate: bool,
    channels: str | None,
    dsn: str | None,
    conversations: int | None,
    questions: int | None,
    rerank: bool,
) -> None:
    """Retrieval quality on LoCoMo conversations (protocol: docs/benchmarks.md)."""
    _quality(
        "locomo",
        data,
        out,
        as_json,
        quiet,
        channels,
        rerank,
        dsn=dsn,
        ablate=ablate,
        conversations=conversations,
        questions=questions,
    )


@bench.command()
@_quality_options(
    "A JSON file in the generic layout (docs/benchmarks.md, 'Any conversation set').", "instance"
)
def retrieval(
    data: Path,
    out: Path | None,
    as_json: bool,
    quiet: bool,
    ablate: bool,
    channels: str | None,
    dsn: str | None,
    instances: int | None,
    questions: int | None,
    rerank: bool,
) -> None:
    """Retrieval quality and abstention on any conversation set (BEAM, your own data)."""
    _quality(
        "retrieval",
        data,
        out,
        as_json,
        quiet,
        channels,
        rerank,
        dsn=dsn,
        ablate=ablate,
        instances=instances,
        questions=questions,
    )


@bench.command()
@click.option("--n", "n", type=click.IntRange(1), required=True, help="Memories to generate.")
@_OUT
@_JSON
@_QUIET
@click.option("--seed", type=int, default=0, show_default=True, help="Generator seed.")
@click.option(
    "--queries", type=click.IntRange(1), default=200, show_default=True, help="Timed queries."
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the store lives (default: a temporary directory).",
)
@click.option("--keep", is_flag=True, help="Keep the store afterwards.")
@click.option(
    "--cold",
    is_flag=True,
    help="Drop the store's files from the page cache before serving (reads start from disk).",
)
@click.option(
    "--real-vectors",
    is_flag=True,
    help="Embed every memory with the real model instead of composing vectors (slow).",
)
@click.option(
    "--extra",
    type=click.IntRange(0),
    default=1000,
    show_default=True,
    help="Memories ingested with the real model after the bulk load (the default-model rate).",
)
@click.option(
    "--singles",
    type=click.IntRange(0),
    default=50,
    show_default=True,
    help="Memories then stored one remember call each (single-call latency, model included).",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Token-vector cache (default: the user cache directory, slm/bench).",
)
@click.option("--dsn", help="Run on this PostgreSQL database (empty; it keeps the memories).")
def scale(
    n: int,
    out: Path | None,
    as_json: bool,
    quiet: bool,
    seed: int,
    queries: int,
    directory: Path | None,
    keep: bool,
    cold: bool,
    real_vectors: bool,
    extra: int,
    singles: int,
    cache_dir: Path | None,
    dsn: str | None,
) -> None:
    """Ingest rate, recall latency, memory and disk at N synthetic memories (docs/benchmarks.md)."""
    from slm_bench import scale as harness

    report = harness.run(
        n,
        seed=seed,
        queries=queries,
        directory=directory,
        keep=keep,
        cold=cold,
        real_vectors=real_vectors,
        settings=Settings.from_env(calibration=None),
        cache_dir=cache_dir,
        extra=extra,
        singles=singles,
        progress=_progress(quiet),
        dsn=dsn,
    )
    flags = f" --seed {seed} --queries {queries}" + (" --real-vectors" if real_vectors else "")
    flags += " --cold" if cold else ""
    flags += " --dsn ..." if dsn else ""
    report["command"] = f"slm bench scale --n {n}{flags}"
    _emit(report, out, as_json, harness.markdown)


@bench.command()
@_OUT
@_JSON
@_QUIET
@click.option(
    "--data",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="A set of users' first-person memories and third-person questions "
    "(bench-data/whose-dev.json, bench-data/whose-blind.json).",
)
def whose(out: Path | None, as_json: bool, quiet: bool, data: Path) -> None:
    """Third-person questions over first-person memories, within each user's scope."""
    from slm_bench import whose as harness

    report = harness.run(
        data, settings=Settings.from_env(calibration=None), progress=_progress(quiet)
    )
    report["command"] = f"slm bench whose --data {data}"
    _emit(report, out, as_json, harness.markdown)


@bench.command()
@_OUT
@_JSON
@_QUIET
@click.option("--seed", type=int, default=0, show_default=True, help="Generator seed.")
@click.option(
    "--histories", type=click.IntRange(1), default=30, show_default=True, help="Histories."
)
@click.option(
    "--phrasings",
    type=click.Choice(["dev", "heldout", "fresh"]),
    default="dev",
    show_default=True,
    help="The generator's phrasing set: the one slm was developed on, the held-out one, "
    "or the fresh, blind one.",
)
@click.option(
    "--locomo",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Also count false links on this LoCoMo file and run its benchmark with the feature on.",
)
@click.option(
    "--data",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A history set written by hand (BENCHMARK.md section 4) instead of the generator.",
)
def lifecycle(
    out: Path | None,
    as_json: bool,
    quiet: bool,
    seed: int,
    histories: int,
    phrasings: str,
    locomo: Path | None,
    data: Path | None,
) -> None:
    """Facts that change: current value, stale-first, as-of and false links (docs/lifecycle.md)."""
    if data is not None:
        from slm_bench import history_set

        report = history_set.run(
            data, settings=Settings.from_env(calibration=None), progress=_progress(quiet)
        )
        report["command"] = f"slm bench lifecycle --data {data}"
        _emit(report, out, as_json, history_set.markdown)
        return
    from slm_bench import lifecycle as harness

    report = harness.run(
        seed=seed,
        histories=histories,
        phrasings=phrasings,
        settings=Settings.from_env(calibration=None),
        locomo=locomo,
        progress=_progress(quiet),
    )
    flags = f" --seed {seed} --histories {histories} --phrasings {phrasings}"
    flags += f" --locomo {locomo}" if locomo else ""
    report["command"] = f"slm bench lifecycle{flags}"
    _emit(report, out, as_json, harness.markdown)


@bench.command()
@_OUT
@_JSON
@_QUIET
@click.option(
    "--locomo",
    "locomo_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The LoCoMo dev file.",
)
@click.option(
    "--beam",
    "beam_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A file in the generic layout (the BEAM dev file).",
)
@click.option(
    "--cache",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep each file's windows here and reuse them (skips storing the data again).",
)
@click.option(
    "--share",
    type=click.FloatRange(0.05, 0.95),
    default=0.3,
    show_default=True,
    help="Share of each group's questions that gets simulated feedback.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the split.")
@click.option(
    "--train-default",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also train a model on both files and write it here (the shipped model is made so).",
)
def learning(
    out: Path | None,
    as_json: bool,
    quiet: bool,
    locomo_file: Path,
    beam_file: Path,
    cache: Path | None,
    share: float,
    seed: int,
    train_default: Path | None,
) -> None:
    """The reranker and learning from feedback, on data they were not trained on
    (docs/learning.md)."""
    from slm_bench import learning as harness

    settings = Settings.from_env(rerank=False, calibration=None)
    files = {
        name: harness.load_or_collect(path, settings, cache, _progress(quiet))
        for name, path in (("locomo-dev", locomo_file), ("beam-dev", beam_file))
    }
    report = harness.evaluate(files, share=share, seed=seed)
    flags = f" --locomo {locomo_file} --beam {beam_file} --share {share} --seed {seed}"
    report["command"] = f"slm bench learning{flags}"
    if train_default is not None:
        model = harness.train_joint(files, "locomo-dev + beam-dev")
        train_default.write_text(model.to_json() + "\n", encoding="utf-8")
        report["trained"] = {"file": str(train_default), "model": model.id}
    _emit(report, out, as_json, harness.markdown)


@bench.command()
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="PNG to write."
)
def plot(files: tuple[Path, ...], out: Path) -> None:
    """Plot recall latency p50/p95/p99 against N from several 'bench scale' JSON reports."""
    from slm_bench import scale as harness

    reports = [_scale_report(path) for path in files]
    try:
        harness.plot(reports, out)
    except ImportError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {out}")


def _scale_report(path: Path) -> dict[str, Any]:
    """A 'bench scale' JSON report, checked for the fields the plot reads."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        int(report["n"])
        for key in ("p50", "p95", "p99"):
            float(report["latency_ms"][key])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise click.ClickException(f"{path} is not a 'bench scale' report: {exc!r}") from None
    if not isinstance(report, dict):
        raise click.ClickException(f"{path} is not a 'bench scale' report")
    return report


@bench.command()
@click.option("--locomo", "locomo_file", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A LoCoMo JSON file (LoCoMo dev).")  # fmt: skip
@click.option("--beam", "beam_file", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A file in the generic layout (BEAM dev).")  # fmt: skip
@click.option("--coding", "coding_file", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Ordinary coding prompts (bench-data/coding-prompts.json).")  # fmt: skip
@click.option("--coding-blind", "blind_file",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Coding prompts never tuned on, reported on their own line.")  # fmt: skip
@click.option("--conversations", type=click.IntRange(1), help="Only the first N of each set.")
@click.option("--no-turn-prompts", is_flag=True,
              help="Do not run the prompt hook for each replayed user turn.")  # fmt: skip
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Plot the trade-off over the minimum relevance to this PNG.")  # fmt: skip
@_OUT
@_JSON
@_QUIET
def hooks(
    locomo_file: Path,
    beam_file: Path,
    coding_file: Path,
    blind_file: Path | None,
    conversations: int | None,
    no_turn_prompts: bool,
    plot_file: Path | None,
    out: Path | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Conversations replayed as Claude Code sessions through the real hook commands:
    evidence in the injected block, injection for prompts nothing answers, latency, and the
    trade-off over the minimum relevance (docs/hooks.md)."""
    from slm_bench import hooks as harness

    report = harness.run(
        locomo_file,
        beam_file,
        coding_file,
        blind_file=blind_file,
        conversations=conversations,
        turn_prompts=not no_turn_prompts,
        progress=_progress(quiet),
    )
    flags = f" --coding-blind {blind_file}" if blind_file else ""
    flags += f" --conversations {conversations}" if conversations else ""
    flags += " --no-turn-prompts" if no_turn_prompts else ""
    report["command"] = (
        f"slm bench hooks --locomo {locomo_file} --beam {beam_file} --coding {coding_file}" + flags
    )
    if plot_file is not None:
        try:
            harness.plot(report, plot_file)
        except ImportError as exc:
            raise click.ClickException(str(exc)) from None
    _emit(report, out, as_json, harness.markdown)
