"""Fitting a calibration from labelled recalls, measuring it on a held-out part, and the
release gate that decides whether an artefact may be written (docs/calibration.md).

The labelled recalls are split by group (a conversation, a corpus: never by question, so
that no store is seen on both sides), with a declared seed. A logistic regression over the
recall's signals is fitted on the fit part (``platt``); ``isotonic`` then maps its score
through an isotonic regression fitted on out-of-fold scores. Both come from scikit-learn,
needed only here (the ``calibrate`` extra); applying an artefact needs numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slm.calibrate.artefact import (
    BINS,
    FORMAT,
    MAX_ECE,
    METHODS,
    MIN_HELDOUT,
    Model,
    content_id,
    gate_failures,
    signal_matrix,
)
from slm.contract import SIGNALS
from slm.errors import CalibrationError, install_hint
from slm.release import VERSION
from slm_fit import metrics

#: Selective-risk targets reported for every part.
RISKS = (0.05, 0.1, 0.2)
#: What ``answer_confidence`` is the probability of.
TARGET = (
    "the probability that the recall's top k results include a memory labelled as evidence "
    "of the answer (a question the store holds no answer to counts as a miss)"
)


@dataclass(frozen=True, slots=True)
class Observation:
    """One labelled recall: its group, its signals, whether its top k held evidence, and
    whether any memory held the answer at all (False: a question the store cannot answer)."""

    group: str
    signals: tuple[float, ...]
    hit: bool
    answerable: bool = True
    #: the group the question was written for, when another than ``group`` (a question of
    #: one conversation asked of another's store)
    origin: str | None = None


@dataclass
class Outcome:
    """What a fit gives: the report, the artefact when the gate passed (None otherwise),
    why it did not, and each part's probabilities and outcomes (for the plots)."""

    report: dict[str, Any]
    artefact: dict[str, Any] | None
    failures: list[str]
    parts: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


def check_options(seed: int, heldout: float, method: str, max_risk: float | None) -> None:
    """Refuse options no calibration can use, before any recall runs."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise CalibrationError(f"the seed must be a whole number 0 or more, not {seed!r}")
    if not 0 < heldout < 1:
        raise CalibrationError(f"the held-out share must be between 0 and 1, not {heldout}")
    if method not in METHODS:
        raise CalibrationError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    if max_risk is not None and not 0 < max_risk < 1:
        raise CalibrationError(f"the risk target must be between 0 and 1, not {max_risk}")


def split(groups: Sequence[str], seed: int, heldout: float) -> tuple[list[str], list[str]]:
    """Fit and held-out groups: the distinct ``groups`` in an order drawn with ``seed``,
    held out in that order up to the count nearest a ``heldout`` share of the recalls
    (each side keeps at least one group)."""
    counts: dict[str, int] = {}
    for group in groups:
        counts[group] = counts.get(group, 0) + 1
    if len(counts) < 2:
        raise CalibrationError(
            f"the labels name {len(counts)} group(s); calibration needs at least two (a "
            "conversation or corpus to fit on and another to hold out), split by group, "
            "never by question"
        )
    names = sorted(counts)
    order = [names[i] for i in np.random.default_rng(seed).permutation(len(names))]
    target = heldout * sum(counts.values())
    running, best, cut = 0, math.inf, 1
    for position, group in enumerate(order[:-1], start=1):
        running += counts[group]
        if abs(running - target) < best:
            best, cut = abs(running - target), position
    return sorted(order[cut:]), sorted(order[:cut])


def _folds(groups: Sequence[str], count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Train/test index pairs over ``count`` items: by group when there are two groups or
    more, else five plain folds."""
    from sklearn.model_selection import GroupKFold, KFold

    distinct = len(set(groups))
    index = np.arange(count)
    if distinct >= 2:
        return list(GroupKFold(n_splits=min(5, distinct)).split(index, groups=list(groups)))
    return list(KFold(n_splits=min(5, count)).split(index))


def fit_model(matrix: np.ndarray, y: np.ndarray, groups: Sequence[str], method: str) -> Model:
    """The calibration model fitted on ``matrix`` (signals) and ``y`` (outcomes)."""
    try:
        from sklearn.isotonic import IsotonicRegression
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler
    except ImportError:
        raise CalibrationError(
            f"fitting a calibration needs scikit-learn: {install_hint('calibrate')}"
        ) from None
    scaler = StandardScaler().fit(matrix)
    scaled = scaler.transform(matrix)
    regression = LogisticRegression(C=1.0, max_iter=5000).fit(scaled, y)
    model = Model(
        "platt",
        np.asarray(scaler.mean_, dtype=np.float64),
        np.asarray(scaler.scale_, dtype=np.float64),
        np.asarray(regression.coef_[0], dtype=np.float64),
        float(regression.intercept_[0]),
    )
    if method == "platt":
        return model
    # The isotonic map learns from scores of recalls the regression did not see.
    scores = out_of_fold(matrix, y, groups, "platt", score=True)
    steps = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(scores, y)
    return Model(
        "isotonic",
        model.mean,
        model.scale,
        model.weights,
        model.bias,
        np.asarray(steps.X_thresholds_, dtype=np.float64),
        np.asarray(steps.y_thresholds_, dtype=np.float64),
    )


def out_of_fold(
    matrix: np.ndarray, y: np.ndarray, groups: Sequence[str], method: str, *, score: bool = False
) -> np.ndarray:
    """Each recall's probability (or, with ``score``, the regression's score) from a model
    fitted on the other folds (by group): what a model makes of recalls it did not see."""
    out = np.empty(len(y))
    for train, test in _folds(groups, len(y)):
        if len(set(y[train])) < 2:
            out[test] = float(y[train].mean()) if not score else 0.0
            continue
        chosen = [groups[i] for i in train]
        model = fit_model(matrix[train], y[train], chosen, method)
        out[test] = model.score(matrix[test]) if score else model.probability(matrix[test])
    return out


def arrays(observations: Sequence[Observation]) -> tuple[np.ndarray, np.ndarray]:
    """The observations' signals as a matrix (refused when one is not finite) and their
    outcomes as 0/1."""
    matrix = signal_matrix([o.signals for o in observations])
    return matrix, np.asarray([1.0 if o.hit else 0.0 for o in observations])


def calibrate(
    observations: Sequence[Observation],
    *,
    k: int,
    fingerprint: Mapping[str, Any],
    distribution: Mapping[str, Any],
    seed: int = 0,
    heldout: float = 0.5,
    method: str = "platt",
    max_risk: float | None = None,
) -> Outcome:
    """Split ``observations`` by group, fit on one part, measure on the other and apply the
    gate. ``fingerprint`` is the running configuration's; ``distribution`` declares the
    corpus and queries the labels come from (kept in the artefact as given). Questions
    written for a group on the other side of the split than the store they were asked of
    (``Observation.origin``) are counted in the report and kept: the model reads the
    store's signals, never the text, and leaving them out would leave a side without
    questions its stores cannot answer."""
    check_options(seed, heldout, method, max_risk)
    if not observations:
        raise CalibrationError("no labelled recalls to calibrate on")
    matrix, y = arrays(observations)
    groups = [o.group for o in observations]
    fit_groups, held_groups = split(groups, seed, heldout)
    fit_set = set(fit_groups)
    across = sum(
        1
        for o in observations
        if o.origin is not None and (o.origin in fit_set) != (o.group in fit_set)
    )
    on_fit = np.asarray([g in fit_set for g in groups])
    for name, mask in (("fit", on_fit), ("held-out", ~on_fit)):
        hits = int(y[mask].sum())
        if hits < 2 or int(mask.sum()) - hits < 2:
            raise CalibrationError(
                f"the {name} part has {hits} recalls whose top {k} held evidence and "
                f"{int(mask.sum()) - hits} whose did not; each part needs at least two of each"
            )
    fit_names = [g for g, m in zip(groups, on_fit, strict=True) if m]
    model = fit_model(matrix[on_fit], y[on_fit], fit_names, method)
    probability = model.probability(matrix)
    answerable = ~on_fit & np.asarray([o.answerable for o in observations])
    parts = {
        "fit": (probability[on_fit], y[on_fit]),
        "heldout": (probability[~on_fit], y[~on_fit]),
    }
    summaries = {name: metrics.summary(p, t, BINS, RISKS) for name, (p, t) in parts.items()}
    summaries["heldout_answerable"] = metrics.summary(
        probability[answerable], y[answerable], BINS, RISKS
    )
    failures = gate_failures(summaries["heldout"]["n"], summaries["heldout"]["ece"])
    abstention = None
    if max_risk is not None:
        unseen = out_of_fold(matrix[on_fit], y[on_fit], fit_names, method)
        abstention = _abstention(unseen, y[on_fit], parts["heldout"], max_risk)
        failures.extend(abstention.pop("failures"))
    body: dict[str, Any] = {
        "format": FORMAT,
        "release": VERSION,
        "fingerprint": dict(fingerprint),
        "k": k,
        "target": TARGET,
        "signals": list(SIGNALS),
        "model": model.to_data(),
        "distribution": {
            **distribution,
            "split": {
                "by": "group",
                "seed": seed,
                "heldout_share": heldout,
                "fit_groups": fit_groups,
                "heldout_groups": held_groups,
                "asked_across_split": across,
            },
        },
        "gate": {"min_heldout": MIN_HELDOUT, "max_ece": MAX_ECE, "bins": BINS},
        **summaries,
        "abstention": abstention,
    }
    body["calibration_id"] = content_id(body)
    report = {key: body[key] for key in ("k", "target", "distribution", "gate", "abstention")}
    report.update(summaries)
    report["model"] = {"method": method, "signals": list(SIGNALS)}
    report["passed"] = not failures
    report["failures"] = failures
    report["calibration_id"] = body["calibration_id"] if not failures else None
    return Outcome(report, None if failures else body, failures, parts)


def _abstention(
    fit_p: np.ndarray,
    fit_y: np.ndarray,
    heldout: tuple[np.ndarray, np.ndarray],
    max_risk: float,
) -> dict[str, Any]:
    """The threshold that meets ``max_risk`` on the fit part's out-of-fold probabilities,
    what it gives on the held-out part (coverage: the share answered; risk: the share of
    those that missed), and why it fails the gate: no threshold, or a held-out risk more
    than two standard errors above the target."""
    threshold = metrics.threshold_for_risk(fit_p, fit_y, max_risk)
    failures = []
    if threshold is None:
        failures.append(f"no threshold gives a selective risk of {max_risk} on the fit part")
    else:
        # Rounded down, as the artefact keeps it, so that the figures are the artefact's.
        threshold = math.floor(threshold * 1e6) / 1e6
    out: dict[str, Any] = {"max_risk": max_risk, "threshold": threshold}
    p, y = heldout
    count, coverage, risk = metrics.answered(p, y, threshold)
    allowed = max_risk + 2 * math.sqrt(max_risk * (1 - max_risk) / max(count, 1))
    out["heldout"] = {
        "coverage": round(coverage, 4),
        "risk": None if risk is None else round(risk, 4),
        "risk_allowed": round(allowed, 4),
    }
    if risk is not None and risk > allowed:
        failures.append(
            f"at the threshold {threshold} the held-out risk is {risk:.3f}, above the target "
            f"{max_risk} by more than two standard errors ({allowed:.3f})"
        )
    out["failures"] = failures
    return out
