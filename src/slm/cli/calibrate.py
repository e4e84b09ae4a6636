"""``slm calibrate``: fit a calibration from labelled recalls, measure it on a held-out
part, and write the artefact only when it passes the release gate (docs/calibration.md).

    slm calibrate --labels FILE [--labels FILE ...] --out calib.json
    slm calibrate locomo --data locomo.json [--db DIR/labels.db] --out calib.json
    slm calibrate retrieval --data beam.json --out calib.json
    slm calibrate evaluate --calibration calib.json --labels FILE
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from slm import validate
from slm.calibrate.artefact import Calibration
from slm.cli.base import Context, json_option, quiet_option, stacked
from slm.embed import Embedder, make_embedder
from slm.engine import Memory
from slm.errors import CalibrationError, InvalidInput, NotFound
from slm.settings import Settings
from slm.store import Location
from slm.store.files import write_private

if TYPE_CHECKING:  # the fitting package is imported only when a fitting command runs
    from slm_fit.calibration import Outcome

F = TypeVar("F", bound=Callable[..., Any])


#: Where a command that measures writes its figures, besides the screen.
_PLOTS = click.option("--plots", type=click.Path(file_okay=False), help="Directory for PNGs.")
_REPORT = click.option("--report", type=click.Path(dir_okay=False), help="JSON report to write.")


def fit_options(func: F) -> F:
    """The options of every command that fits a calibration."""
    return stacked(
        func,
        click.option("--out", type=click.Path(dir_okay=False), help="Artefact to write."),
        click.option("-k", "--k", type=int, default=10, show_default=True, help="Calibrated k."),
        click.option("--seed", type=int, default=0, show_default=True, help="Split seed."),
        click.option(
            "--heldout",
            type=float,
            default=0.5,
            show_default=True,
            help="Share of labelled recalls held out (by group).",
        ),
        click.option(
            "--method", type=click.Choice(["platt", "isotonic"]), default="platt", show_default=True
        ),
        click.option("--max-risk", type=float, help="Selective-risk target for abstention."),
        click.option("--corpus", help="The corpus the labels come from, in words."),
        click.option("--queries", help="The questions the labels are, in words."),
        _PLOTS,
        _REPORT,
        json_option,
        quiet_option,
    )


def build_options(func: F) -> F:
    """The options of the commands that build labels from a benchmark file, then fit."""
    return stacked(
        fit_options(func),
        click.option("--data", required=True, type=click.Path(dir_okay=False, exists=True)),
        click.option(
            "--db",
            type=click.Path(dir_okay=False),
            help="New SQLite file to build (default: temporary).",
        ),
        click.option(
            "--labels-out", type=click.Path(dir_okay=False), help="Write the labels here."
        ),
    )


@click.group("calibrate", invoke_without_command=True)
@click.option(
    "--labels", "label_files", multiple=True, type=click.Path(dir_okay=False), help="JSON Lines."
)
@fit_options
@click.pass_context
def calibrate_command(ctx: click.Context, /, label_files: tuple[str, ...], **fit: Any) -> None:
    """Fit answer_confidence from labelled recalls of the store (--labels, JSON Lines: query,
    evidence ids, profile, group, now). The fit and held-out parts are split by group; the
    artefact is written only when held-out n >= 500 and ECE <= 0.05."""
    if ctx.invoked_subcommand is not None:
        given = [
            name
            for name in ("label_files", *fit)
            if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE
        ]
        if given:
            raise click.UsageError(
                f"give --{given[0].replace('label_files', 'labels').replace('_', '-')} after "
                f"'{ctx.invoked_subcommand}', not before it"
            )
        return
    if not label_files:
        raise click.UsageError("give --labels FILE, or one of: locomo, retrieval, evaluate")
    obj = ctx.find_object(Context)
    assert obj is not None
    settings = _settings()
    _fit(label_files, obj.profile, _opener(obj.location(), settings, None), fit)


@calibrate_command.command("locomo")
@build_options
def locomo_command(data: str, db: str | None, labels_out: str | None, **fit: Any) -> None:
    """Build labels from a LoCoMo file (each store also asked the next conversation's
    questions, as holding no answer) and calibrate on them."""
    from slm_bench import calibration

    def build(path: Path, settings: Settings, embedder: Embedder) -> list[dict[str, Any]]:
        return calibration.locomo_labels(data, path, settings, embedder, _progress(fit))

    fit["corpus"] = fit["corpus"] or calibration.LOCOMO_CORPUS
    fit["queries"] = fit["queries"] or calibration.LOCOMO_QUERIES
    _built(build, db, labels_out, fit)


@calibrate_command.command("retrieval")
@build_options
def retrieval_command(data: str, db: str | None, labels_out: str | None, **fit: Any) -> None:
    """Build labels from a file in the generic benchmark layout (BENCHMARK.md section 3;
    unanswerable questions as holding no answer) and calibrate on them."""
    from slm_bench import calibration

    def build(path: Path, settings: Settings, embedder: Embedder) -> list[dict[str, Any]]:
        name, labels = calibration.retrieval_labels(data, path, settings, embedder, _progress(fit))
        # the data set's name is known once it is read
        fit["corpus"] = fit["corpus"] or calibration.RETRIEVAL_CORPUS.format(name=name)
        fit["queries"] = fit["queries"] or calibration.RETRIEVAL_QUERIES.format(name=name)
        return labels

    _built(build, db, labels_out, fit)


@calibrate_command.command("evaluate")
@click.option("--calibration", "artefact", required=True, type=click.Path(dir_okay=False))
@click.option("--labels", "label_files", required=True, multiple=True, type=click.Path())
@_PLOTS
@_REPORT
@json_option
@quiet_option
@click.pass_obj
def evaluate_command(
    obj: Context,
    artefact: str,
    label_files: tuple[str, ...],
    plots: str | None,
    report: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Measure an artefact on labelled recalls of this store (all of them held out): how it
    does on another corpus or query distribution than it was fitted on."""
    from slm_fit import labelled

    settings = _settings()
    opener = _opener(obj.location(), settings, None)
    labels, _ = labelled.read_labels(label_files, obj.profile)
    with opener(labels[0].profile) as memory:
        calibration = Calibration.load(artefact, memory.fingerprint())
    progress = None if quiet else _echo
    observations, _ = labelled.observe(labels, opener, calibration.k, progress)
    figures, part = labelled.evaluate(calibration, observations)
    _write_report(figures, report)
    if plots:
        _plots({"evaluated": part}, plots, Path(artefact).stem + "-evaluated", None)
    if as_json:
        click.echo(json.dumps(figures, indent=2))
        return
    click.echo(f"{calibration.id} on {len(observations)} labelled recalls (all held out):")
    click.echo("  " + _figures(figures))
    abstain = figures.get("abstention")
    if abstain:
        click.echo(
            f"  at its threshold {abstain['threshold']} (max risk {abstain['max_risk']}): "
            f"coverage {abstain['coverage']}, risk {abstain['risk']}"
        )


# -- the parts --------------------------------------------------------------------------


def _settings() -> Settings:
    # Fitting reads recalls as the configuration makes them, without any loaded artefact.
    return replace(Settings.from_env(), calibration=None)


def _opener(
    location: Location, settings: Settings, embedder: Embedder | None
) -> Callable[[str], AbstractContextManager[Memory]]:
    if not location.exists():
        raise NotFound(f"no store at {location.path}: the labels' memories must be stored")
    shared = embedder or make_embedder(settings.embedder)

    def open_memory(profile: str) -> AbstractContextManager[Memory]:
        return Memory(location, profile=profile, settings=settings, embedder=shared)

    return open_memory


def _echo(line: str) -> None:
    click.echo(line, err=True)


def _progress(fit: dict[str, Any]) -> Callable[[str], None] | None:
    return None if fit.get("quiet") else _echo


@contextmanager
def _build_path(db: str | None) -> Iterator[Path]:
    if db is not None:
        path = Path(db).expanduser()
        if not path.parent.is_dir():
            raise click.UsageError(f"the directory {path.parent} does not exist")
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="slm-calibrate-") as tmp:
        yield Path(tmp) / "labels.db"


def _built(
    build: Callable[[Path, Settings, Embedder], list[dict[str, Any]]],
    db: str | None,
    labels_out: str | None,
    fit: dict[str, Any],
) -> None:
    from slm_bench.calibration import write_labels

    if labels_out and not db:
        raise click.UsageError("--labels-out names memories of the store: give --db to keep it")
    _check(fit)
    settings = _settings()
    embedder = make_embedder(settings.embedder)
    with _build_path(db) as path, tempfile.TemporaryDirectory(prefix="slm-labels-") as tmp:
        labels_path = Path(labels_out) if labels_out else Path(tmp) / "labels.jsonl"
        write_labels(build(path, settings, embedder), labels_path)
        _fit([str(labels_path)], "default", _opener(Location(path=path), settings, embedder), fit)


def _fit(
    label_files: Sequence[str],
    profile: str,
    opener: Callable[[str], AbstractContextManager[Memory]],
    fit: dict[str, Any],
) -> None:
    from slm_fit import labelled
    from slm_fit.calibration import calibrate

    _check(fit)
    labels, digest = labelled.read_labels(label_files, profile)
    observations, running = labelled.observe(labels, opener, fit["k"], _progress(fit))
    declared = labelled.distribution(
        labels,
        label_files,
        digest,
        fit["corpus"] or "the stores the labels name, as they are",
        fit["queries"] or "the labelled questions, as given",
    )
    outcome = calibrate(
        observations,
        k=fit["k"],
        fingerprint=running,
        distribution=declared,
        seed=fit["seed"],
        heldout=fit["heldout"],
        method=fit["method"],
        max_risk=fit["max_risk"],
    )
    _write_report(outcome.report, fit["report"])
    if fit["plots"]:
        name = Path(fit["out"]).stem if fit["out"] else "calibration"
        _plots({"held out": outcome.parts["heldout"]}, fit["plots"], name, fit["max_risk"])
    _show(outcome, fit)
    if outcome.failures:
        raise CalibrationError(
            "the release gate refused this calibration, and no artefact was written: "
            + "; ".join(outcome.failures)
        )
    assert outcome.artefact is not None
    if not fit["out"]:
        if not fit["as_json"]:
            click.echo("no artefact written: give --out FILE to write one")
        return
    out = Path(fit["out"])
    write_private(out, json.dumps(outcome.artefact, indent=2, sort_keys=True) + "\n")
    if not fit["as_json"]:
        click.echo(f"wrote {out} ({outcome.artefact['calibration_id']})")


def _check(fit: dict[str, Any]) -> None:
    """Refuse options that would fail only after every recall ran."""
    from slm_fit.calibration import check_options

    check_options(fit["seed"], fit["heldout"], fit["method"], fit["max_risk"])
    validate.k(fit["k"])
    for option in ("out", "report"):
        if fit[option] and not Path(fit[option]).expanduser().parent.is_dir():
            raise InvalidInput(
                f"--{option}: the directory {Path(fit[option]).parent} does not exist",
                field=option,
            )


def _show(outcome: Outcome, fit: dict[str, Any]) -> None:
    report = outcome.report
    if fit["as_json"]:
        click.echo(json.dumps(report, indent=2))
        return
    split = report["distribution"]["split"]
    for part, groups in (("fit", "fit_groups"), ("heldout", "heldout_groups")):
        click.echo(f"{part} ({len(split[groups])} groups): " + _figures(report[part]))
    click.echo("heldout, answerable questions only: " + _figures(report["heldout_answerable"]))
    abstain = report["abstention"]
    if abstain:
        held = abstain["heldout"]
        click.echo(
            f"abstention at max risk {abstain['max_risk']}: threshold {abstain['threshold']} "
            f"(from the fit part, out of fold); held out: coverage {held['coverage']}, risk "
            f"{held['risk']} (allowed {held['risk_allowed']})"
        )
    verdict = "passed" if not outcome.failures else "refused: " + "; ".join(outcome.failures)
    click.echo(f"gate (held-out n >= 500, ECE <= 0.05): {verdict}")


def _figures(figures: dict[str, Any]) -> str:
    coverage = ", ".join(f"{r}: {c}" for r, c in figures["coverage_at_risk"].items())
    return (
        f"n {figures['n']}, hit rate {figures['hit_rate']}, ECE {figures['ece']}, "
        f"Brier {figures['brier']}, AURC {figures['aurc']}, AUROC {figures['auroc']}; "
        f"coverage at risk {coverage}"
    )


def _write_report(report: dict[str, Any], path: str | None) -> None:
    if path:
        write_private(Path(path), json.dumps(report, indent=2) + "\n")


def _plots(series: Any, directory: str, name: str, max_risk: float | None) -> None:
    from slm_fit.plots import draw

    for path in draw(series, Path(directory) / name, name, max_risk):
        click.echo(f"wrote {path}", err=True)
