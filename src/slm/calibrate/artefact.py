"""A calibration artefact: what turns a recall's signals into ``answer_confidence``, and the
identity that ties it to one release and one retrieval configuration (docs/calibration.md).

An artefact is a JSON object. Its ``calibration_id`` is a hash of everything else in it, so
an artefact edited after it was written no longer matches its own id and is refused. It
holds the release and the configuration fingerprint it was fitted under, the declared
corpus and query distribution, the model (a logistic model over the signals, optionally
followed by an isotonic map), the held-out metrics and, when one was declared, the
selective-risk threshold below which a recall abstains. Applying it needs numpy only.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from slm.channels import Channel, enabled, weight
from slm.contract import SCORE_CONTRACT_VERSION, SELECTIVE_RISK, SIGNALS, RecallResponse
from slm.errors import CalibrationError
from slm.release import VERSION
from slm.settings import Settings

FORMAT = "slm-calibration/1"
#: The release gate: the least held-out labelled recalls and the largest held-out expected
#: calibration error (15 equal-width bins) an artefact may be written, or loaded, with.
MIN_HELDOUT = 500
MAX_ECE = 0.05
BINS = 15
METHODS = ("platt", "isotonic")

#: The settings that change which memories a recall returns, and so what a calibration
#: means; every other setting is listed in IGNORED_SETTINGS with why it does not count.
RETRIEVAL_SETTINGS = (
    "rrf_k",
    "candidates_per_channel",
    "embedder",
    "semantic_floor",
    "lexical_floor",
    "relevance_cos_low",
    "relevance_cos_high",
    "bm25_k1",
    "bm25_b",
    "entity_boost",
    "evidence_weight",
    "graph_boost",
    "speaker_boost",
    "role_boost",
    "fact_boost",
    "reader_top",
    "reader_pieces",
)
IGNORED_SETTINGS = {
    "channels": "counted as the channels and their weights",
    "weights": "counted as the channels and their weights",
    "required_channels": "checked when a store opens; changes no ranking",
    "trust_prior": "changes trust_score, not which memories return",
    "legacy_aliases": "changes field names only",
    "update_policy": "acts when memories are written",
    "scope_keys": "acts when memories are written (their identity and links)",
    "rerank": "counted as the ranker's id",
    "rerank_model": "counted as the ranker's id",
    "reader": "counted as the reader's id (its files' content hash)",
    "learning": "a profile's own ranker is checked on each recall",
    "calibration": "the artefact itself",
}


def fingerprint(
    settings: Settings,
    channels: Mapping[str, Channel],
    embedder: str,
    ranker: str | None,
    store: str,
    reader: str | None = None,
) -> dict[str, Any]:
    """The identity of a running release and retrieval configuration: release, contract,
    the kind of store (SQLite searches vectors exactly, PostgreSQL through an approximate
    index), embedder, the channels allowed to run with their fusion weights, the ranking
    model's id (None: no reranker), the reader's id (None: no reader) and the settings in
    :data:`RETRIEVAL_SETTINGS`. Every model that reorders results is named by its content,
    not by where it lies, so another model at the same path is another configuration."""
    return {
        "release": VERSION,
        "score_contract_version": SCORE_CONTRACT_VERSION,
        "store": store,
        "embedder": embedder,
        "channels": {
            name: weight(settings, channels[name])
            for name in sorted(enabled(settings))
            if name in channels
        },
        "ranker": ranker,
        "reader": reader,
        "settings": {name: getattr(settings, name) for name in RETRIEVAL_SETTINGS},
    }


def content_id(body: Mapping[str, Any]) -> str:
    """``cal-`` and 16 hex digits of the SHA-256 of ``body`` (without its own id) as
    canonical JSON."""
    rest = {key: value for key, value in body.items() if key != "calibration_id"}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return "cal-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def differences(expected: Mapping[str, Any], running: Mapping[str, Any]) -> list[str]:
    """What differs between two fingerprints, in words (empty: they match)."""
    out = []
    for key in sorted(expected.keys() | running.keys()):
        mine, theirs = expected.get(key), running.get(key)
        if mine == theirs:
            continue
        if isinstance(mine, dict) and isinstance(theirs, dict):
            for inner in sorted(mine.keys() | theirs.keys()):
                was, now = mine.get(inner), theirs.get(inner)
                if was != now:
                    out.append(f"{key}.{inner}: artefact {was!r}, running {now!r}")
        else:
            out.append(f"{key}: artefact {mine!r}, running {theirs!r}")
    return out


@dataclass(frozen=True, slots=True)
class Model:
    """The monotone map from signals to a probability: standardise, weigh, then a sigmoid
    (``platt``) or an isotonic step function of the weighted sum (``isotonic``)."""

    method: str
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    steps_x: np.ndarray | None = None
    steps_y: np.ndarray | None = None

    def score(self, matrix: np.ndarray) -> np.ndarray:
        """The weighted sum for each row of ``matrix`` (rows: recalls, columns: signals)."""
        out: np.ndarray = ((matrix - self.mean) / self.scale) @ self.weights + self.bias
        return out

    def probability(self, matrix: np.ndarray) -> np.ndarray:
        z = self.score(matrix)
        if self.method == "isotonic":
            assert self.steps_x is not None and self.steps_y is not None
            stepped: np.ndarray = np.interp(z, self.steps_x, self.steps_y)
            return stepped
        sigmoid: np.ndarray = 1.0 / (1.0 + np.exp(-np.clip(z, -40.0, 40.0)))
        return sigmoid

    def to_data(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "mean": [float(v) for v in self.mean],
            "scale": [float(v) for v in self.scale],
            "weights": [float(v) for v in self.weights],
            "bias": float(self.bias),
            "isotonic": None
            if self.steps_x is None or self.steps_y is None
            else {"x": [float(v) for v in self.steps_x], "y": [float(v) for v in self.steps_y]},
        }

    @classmethod
    def from_data(cls, data: Any) -> Model:
        if not isinstance(data, dict) or data.get("method") not in METHODS:
            raise CalibrationError(f"model.method must be one of {', '.join(METHODS)}")
        columns = len(SIGNALS)
        mean = _numbers(data.get("mean"), "model.mean", columns)
        scale = _numbers(data.get("scale"), "model.scale", columns)
        if np.any(scale <= 0):
            raise CalibrationError("model.scale must be positive")
        weights = _numbers(data.get("weights"), "model.weights", columns)
        bias = _numbers([data.get("bias")], "model.bias", 1)[0]
        steps = data.get("isotonic")
        if data["method"] == "platt":
            return cls("platt", mean, scale, weights, float(bias))
        if not isinstance(steps, dict):
            raise CalibrationError("an isotonic model needs model.isotonic {x, y}")
        x = _numbers(steps.get("x"), "model.isotonic.x", None)
        y = _numbers(steps.get("y"), "model.isotonic.y", len(x))
        if len(x) < 2 or np.any(np.diff(x) < 0) or np.any(np.diff(y) < 0):
            raise CalibrationError("model.isotonic needs two or more non-decreasing steps")
        if np.any((y < 0) | (y > 1)):
            raise CalibrationError("model.isotonic.y must lie in [0, 1]")
        return cls("isotonic", mean, scale, weights, float(bias), x, y)


def _finite(value: Any) -> bool:
    """A real number (not a bool) that a float holds and that is finite."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _numbers(value: Any, what: str, length: int | None) -> np.ndarray:
    if not isinstance(value, list) or not all(_finite(v) for v in value):
        raise CalibrationError(f"{what} must be a list of finite numbers")
    if length is not None and len(value) != length:
        raise CalibrationError(f"{what} has {len(value)} numbers; this release needs {length}")
    return np.asarray(value, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Calibration:
    """A loaded artefact that passed every check (:meth:`load`)."""

    id: str
    k: int
    model: Model
    fingerprint: Mapping[str, Any]
    #: abstain below this probability (None: no selective-risk target was declared)
    threshold: float | None
    max_risk: float | None
    data: Mapping[str, Any]

    @classmethod
    def load(cls, path: str | Path, running: Mapping[str, Any]) -> Calibration:
        """The artefact at ``path``, refused with a :class:`CalibrationError` that says why
        when it cannot be read, was edited, did not pass the gate, or was made for another
        release or configuration than ``running`` (a :func:`fingerprint`)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            # ValueError covers undecodable text, bad JSON and numbers too long to read
            raise CalibrationError(f"cannot read calibration artefact {path}: {exc}") from None
        return cls.from_data(data, running, str(path))

    @classmethod
    def from_data(cls, data: Any, running: Mapping[str, Any], where: str) -> Calibration:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CalibrationError(f"{where} is not a calibration artefact (format {FORMAT})")
        try:
            actual = content_id(data)
        except (TypeError, ValueError) as exc:
            raise CalibrationError(f"{where} holds a value JSON cannot hash: {exc}") from None
        if data.get("calibration_id") != actual:
            raise CalibrationError(
                f"{where} was changed after it was written: its content hashes to {actual}, "
                f"not to its calibration_id {data.get('calibration_id')!r}; fit it again "
                "with 'slm calibrate'"
            )
        expected = data.get("fingerprint")
        if not isinstance(expected, dict):
            raise CalibrationError(f"{where} has no fingerprint")
        if expected.get("release") != running.get("release"):
            raise CalibrationError(
                f"{where} was fitted for slm {expected.get('release')}, and this is slm "
                f"{running.get('release')}; scores move between releases, so calibrate this "
                "release again"
            )
        changed = differences(expected, running)
        if changed:
            raise CalibrationError(
                f"{where} was fitted under another retrieval configuration ("
                + "; ".join(changed)
                + "); calibrate this configuration, or run with the artefact's"
            )
        if data.get("signals") != list(SIGNALS):
            raise CalibrationError(f"{where} reads other signals than this release computes")
        metrics = data.get("heldout")
        if not isinstance(metrics, dict):
            raise CalibrationError(f"{where} has no held-out metrics")
        failed = gate_failures(metrics.get("n"), metrics.get("ece"))
        if failed:
            raise CalibrationError(f"{where} did not pass the release gate: {'; '.join(failed)}")
        k = data.get("k")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise CalibrationError(f"{where}: k must be a positive integer")
        abstain = data.get("abstention")
        threshold = max_risk = None
        if abstain is not None:
            if not isinstance(abstain, dict):
                raise CalibrationError(f"{where}: abstention must be an object or null")
            threshold = float(_numbers([abstain.get("threshold")], "abstention.threshold", 1)[0])
            max_risk = float(_numbers([abstain.get("max_risk")], "abstention.max_risk", 1)[0])
        model = Model.from_data(data.get("model"))
        return cls(actual, k, model, expected, threshold, max_risk, data)

    def apply(
        self, response: RecallResponse, *, ranker: str | None, restricted: bool
    ) -> RecallResponse:
        """``response`` with this calibration's id and ``answer_confidence`` (and, below the
        selective-risk threshold, abstained), when the recall is one the calibration covers:
        asked for the calibrated ``k``, with every channel allowed, every result kept (no
        ``min_relevance``) and the calibrated ranker. Any other recall is returned unchanged
        (uncalibrated), and its trace says why."""
        signals = response.signals
        reason = None
        if signals is None:
            reason = "the recall computed no signals"
        elif signals.k != self.k:
            reason = f"k is {signals.k}; this calibration covers k={self.k} only"
        elif restricted:
            reason = "the recall restricted its channels or its results (min_relevance)"
        elif ranker != self.fingerprint.get("ranker"):
            reason = f"the recall was reranked by {ranker}, not by the calibrated ranker"
        probability = None
        if reason is None:
            assert signals is not None
            value = float(self.model.probability(np.asarray([signals.values]))[0])
            if math.isfinite(value):
                probability = round(min(max(value, 0.0), 1.0), 6)
            else:
                reason = "the signals gave no finite probability"
        trace = response.trace
        if trace is not None:
            trace = {
                **trace,
                "calibration": {
                    "calibration_id": self.id,
                    "applied": probability is not None,
                    "reason": reason,
                    "signals": signals.named() if signals is not None else None,
                    "threshold": self.threshold,
                },
            }
        if probability is None:
            return replace(response, trace=trace)
        abstain = (
            self.threshold is not None and probability < self.threshold and not response.abstained
        )
        return replace(
            response,
            trace=trace,
            calibration_id=self.id,
            answer_confidence=probability,
            abstained=response.abstained or abstain,
            abstention_reason=SELECTIVE_RISK if abstain else response.abstention_reason,
        )

    def describe(self) -> dict[str, Any]:
        """For health: the id, what it covers and its held-out figures."""
        return {
            "status": "calibrated",
            "calibration_id": self.id,
            "k": self.k,
            "method": self.model.method,
            "max_risk": self.max_risk,
            "threshold": self.threshold,
            "distribution": self.data.get("distribution"),
            "heldout": {
                key: self.data["heldout"].get(key)
                for key in ("n", "ece", "brier", "aurc", "coverage_at_risk")
            },
        }


def gate_failures(n: Any, ece: Any) -> list[str]:
    """Why held-out figures ``n`` (labelled recalls) and ``ece`` fail the gate (empty:
    they pass)."""
    out = []
    if not isinstance(n, int) or isinstance(n, bool) or n < MIN_HELDOUT:
        out.append(f"the held-out part has {n} labelled recalls; the gate needs {MIN_HELDOUT}")
    if not _finite(ece) or ece > MAX_ECE:
        out.append(f"held-out ECE is {ece}; the gate allows at most {MAX_ECE}")
    return out


def signal_matrix(rows: Sequence[Sequence[float]]) -> np.ndarray:
    """Rows of signals as a matrix, refused when a value is missing or not finite."""
    matrix = np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)
    if matrix.shape[1] != len(SIGNALS) and len(rows):
        raise CalibrationError(f"each recall needs {len(SIGNALS)} signals, not {matrix.shape[1]}")
    bad = ~np.isfinite(matrix).all(axis=1)
    if bad.any():
        raise CalibrationError(
            f"{int(bad.sum())} recalls have signals that are not finite numbers (first: row "
            f"{int(np.argmax(bad))})"
        )
    return matrix
