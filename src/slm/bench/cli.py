"""``slm bench``: the benchmark commands (a thin layer over ``slm.bench.locomo``)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from slm.settings import Settings, parse_channel_list


@click.group()
def bench() -> None:
    """Measure retrieval quality and speed with the benchmarks that ship with slm."""


@bench.command()
@click.option(
    "--data",
    "data",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A LoCoMo JSON file (the original layout).",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the JSON here.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report on stdout.")
@click.option("--ablate", is_flag=True, help="Also run with each channel switched off in turn.")
@click.option("--channels", help="Comma-separated channels (default: all).")
@click.option("--dsn", envvar="SLM_DSN", help="Run on PostgreSQL (one profile per conversation).")
@click.option("--conversations", type=int, help="Only the first N conversations.")
@click.option("--questions", type=int, help="Only the first N questions of each conversation.")
def locomo(
    data: Path,
    out: Path | None,
    as_json: bool,
    ablate: bool,
    channels: str | None,
    dsn: str | None,
    conversations: int | None,
    questions: int | None,
) -> None:
    """Retrieval quality on LoCoMo conversations (protocol: docs/benchmarks.md)."""
    from slm.bench import locomo as harness

    chosen = parse_channel_list(channels, "--channels") if channels else None

    def progress(line: str) -> None:
        if not as_json:
            click.echo(line, err=True)

    report = harness.run(
        data,
        dsn=dsn,
        settings=Settings.from_env(),
        channels=chosen,
        ablate=ablate,
        conversations=conversations,
        questions=questions,
        progress=progress,
    )
    options = {"--channels": channels, "--conversations": conversations, "--questions": questions}
    command = [f"slm bench locomo --data {data}", *(f"{k} {v}" for k, v in options.items() if v)]
    report["command"] = " ".join(command + (["--ablate"] if ablate else []))
    report["store"] = "postgresql" if dsn else "sqlite"
    if out is not None:
        out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(harness.markdown(report))
