"""The two pictures of a calibration's held-out part: a reliability diagram (observed rate
against mean probability per bin, with the counts) and a risk-coverage curve (selective
risk against the share answered). matplotlib, imported only here."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from slm.calibrate.artefact import BINS
from slm.errors import CalibrationError, install_hint
from slm_fit import metrics

Series = Mapping[str, tuple[np.ndarray, np.ndarray]]


def draw(series: Series, prefix: Path, title: str, max_risk: float | None = None) -> list[Path]:
    """Write ``{prefix}-reliability.png`` and ``{prefix}-risk-coverage.png`` for each named
    ``(probabilities, outcomes)`` in ``series``; return the paths."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CalibrationError(f"plots need matplotlib: {install_hint('calibrate')}") from None
    prefix.parent.mkdir(parents=True, exist_ok=True)
    reliability_path = prefix.with_name(prefix.name + "-reliability.png")
    curve_path = prefix.with_name(prefix.name + "-risk-coverage.png")

    figure, (top, bottom) = plt.subplots(
        2, 1, figsize=(6, 6.5), gridspec_kw={"height_ratios": [3, 1]}, sharex=True
    )
    top.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect")
    for name, (p, y) in series.items():
        table = metrics.reliability(p, y, BINS)
        label = f"{name} (n={len(p)}, ECE {metrics.ece(p, y, BINS):.3f})"
        top.plot(
            [r["mean_probability"] for r in table],
            [r["observed"] for r in table],
            marker="o",
            label=label,
        )
        bottom.hist(p, bins=BINS, range=(0, 1), alpha=0.6, label=name)
    top.set_ylabel("observed share whose top k held evidence")
    top.set_title(f"Reliability: {title}")
    top.legend(loc="upper left", fontsize=8)
    top.set_xlim(0, 1)
    top.set_ylim(0, 1)
    bottom.set_xlabel(f"answer_confidence ({BINS} bins)")
    bottom.set_ylabel("recalls")
    figure.tight_layout()
    figure.savefig(reliability_path, dpi=110)
    plt.close(figure)

    figure, axes = plt.subplots(figsize=(6, 4.5))
    for name, (p, y) in series.items():
        coverage, risk, _ = metrics.risk_coverage(p, y)
        line = axes.plot(coverage, risk, label=f"{name} (AURC {metrics.aurc(p, y):.3f})")
        # The best any order could do: every hit answered before any miss.
        best = np.clip(1.0 - float(y.mean()) / np.maximum(coverage, 1e-9), 0.0, None)
        axes.plot(coverage, best, color=line[0].get_color(), linestyle="--", linewidth=0.8,
                  label=f"{name}: best possible (hits first)")  # fmt: skip
    if max_risk is not None:
        axes.axhline(max_risk, color="grey", linestyle=":", label=f"risk target {max_risk:g}")
    axes.set_xlabel("coverage (share of recalls answered, most confident first)")
    axes.set_ylabel("selective risk (share answered whose top k missed)")
    axes.set_title(f"Risk-coverage: {title}")
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    figure.savefig(curve_path, dpi=110)
    plt.close(figure)
    return [reliability_path, curve_path]
