"""How well probabilities match outcomes, and what answering only above a threshold costs:
expected calibration error, Brier score, the reliability table, the risk-coverage curve, its
area (AURC) and coverage at a selective-risk target. Plain numpy; ``p`` are probabilities,
``y`` outcomes (1: the top k held the answer's evidence)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def reliability(p: np.ndarray, y: np.ndarray, bins: int) -> list[dict[str, Any]]:
    """Per equal-width bin of ``p`` over [0, 1] with members: its bounds, count, mean
    probability and observed rate (the last bin includes 1)."""
    index = np.minimum((p * bins).astype(int), bins - 1)
    out = []
    for b in range(bins):
        member = index == b
        count = int(member.sum())
        if count:
            out.append(
                {
                    "low": b / bins,
                    "high": (b + 1) / bins,
                    "n": count,
                    "mean_probability": float(p[member].mean()),
                    "observed": float(y[member].mean()),
                }
            )
    return out


def ece(p: np.ndarray, y: np.ndarray, bins: int) -> float:
    """Expected calibration error: the count-weighted mean gap between each bin's mean
    probability and its observed rate."""
    if not len(p):
        return float("nan")
    table = reliability(p, y, bins)
    return float(
        sum(row["n"] * abs(row["mean_probability"] - row["observed"]) for row in table) / len(p)
    )


def brier(p: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((p - y) ** 2)) if len(p) else float("nan")


def risk_coverage(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Answering the ``i`` most confident recalls, for every ``i``: coverage (``i / n``),
    selective risk (the share of those answered whose top k missed) and the threshold
    (the ``i``-th highest probability). Recalls of equal probability are taken together."""
    order = np.argsort(-p, kind="stable")
    sorted_p, misses = p[order], 1.0 - y[order]
    # Only the last of a run of equal probabilities is a threshold one can set.
    ends = np.flatnonzero(np.r_[sorted_p[1:] != sorted_p[:-1], True])
    answered = ends + 1
    risk = np.cumsum(misses)[ends] / answered
    return answered / len(p), risk, sorted_p[ends]


def aurc(p: np.ndarray, y: np.ndarray) -> float:
    """Area under the risk-coverage curve: the selective risk averaged over every
    coverage from one recall to all (lower is better; a perfect ranking of hits before
    misses gives its minimum). Recalls of equal probability share their misses evenly, so
    the order they were given in does not matter."""
    if not len(p):
        return float("nan")
    order = np.argsort(-p, kind="stable")
    sorted_p, misses = p[order], 1.0 - y[order]
    starts = np.flatnonzero(np.r_[True, sorted_p[1:] != sorted_p[:-1]])
    sums = np.add.reduceat(misses, starts)
    sizes = np.diff(np.r_[starts, len(p)])
    even = np.repeat(sums / sizes, sizes)
    return float(np.mean(np.cumsum(even) / np.arange(1, len(p) + 1)))


def coverage_at_risk(p: np.ndarray, y: np.ndarray, max_risk: float) -> float:
    """The largest share of recalls that can be answered, most confident first, with a
    selective risk of at most ``max_risk`` (0.0 when not even the most confident can)."""
    if not len(p):
        return 0.0
    coverage, risk, _ = risk_coverage(p, y)
    ok = risk <= max_risk + 1e-12
    return float(coverage[ok].max()) if ok.any() else 0.0


def threshold_for_risk(p: np.ndarray, y: np.ndarray, max_risk: float) -> float | None:
    """The lowest probability to answer at such that those answered at or above it have a
    selective risk of at most ``max_risk`` (None: no threshold reaches it)."""
    if not len(p):
        return None
    _, risk, thresholds = risk_coverage(p, y)
    ok = np.flatnonzero(risk <= max_risk + 1e-12)
    return float(thresholds[ok[-1]]) if len(ok) else None


def answered(
    p: np.ndarray, y: np.ndarray, threshold: float | None
) -> tuple[int, float, float | None]:
    """Answering the recalls at or above ``threshold`` (None: none): how many, their share
    and their selective risk (None when none is answered)."""
    chosen = p >= threshold if threshold is not None else np.zeros(len(p), dtype=bool)
    count = int(chosen.sum())
    risk = float(1.0 - y[chosen].mean()) if count else None
    return count, count / len(p) if len(p) else 0.0, risk


def auroc(p: np.ndarray, y: np.ndarray) -> float:
    """The probability that a recall whose top k held the evidence gets a higher probability
    than one whose top k did not (ties count half); NaN with only one kind."""
    pos, neg = p[y == 1], p[y == 0]
    if not len(pos) or not len(neg):
        return float("nan")
    ranks = _ranks(np.concatenate([pos, neg]))
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def _ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given their mean rank."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    for end in range(1, len(values) + 1):
        if end == len(values) or sorted_values[end] != sorted_values[start]:
            ranks[order[start:end]] = (start + end + 1) / 2
            start = end
    return ranks


def summary(p: np.ndarray, y: np.ndarray, bins: int, risks: tuple[float, ...]) -> dict[str, Any]:
    """Every figure of one part (fit or held out), rounded for the report (None where a
    figure is undefined, as AUROC is with one kind of outcome)."""
    return {
        "n": len(p),
        "hits": int(y.sum()),
        "hit_rate": _rounded(float(y.mean()) if len(p) else math.nan),
        "mean_probability": _rounded(float(p.mean()) if len(p) else math.nan),
        "ece": _rounded(ece(p, y, bins)),
        "brier": _rounded(brier(p, y)),
        "aurc": _rounded(aurc(p, y)),
        "auroc": _rounded(auroc(p, y)),
        "coverage_at_risk": {f"{r:g}": _rounded(coverage_at_risk(p, y, r)) for r in risks},
        "reliability": [
            {key: _rounded(v) if isinstance(v, float) else v for key, v in row.items()}
            for row in reliability(p, y, bins)
        ],
    }


def _rounded(value: float) -> float | None:
    return round(value, 4) if math.isfinite(value) else None
