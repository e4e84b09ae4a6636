"""The learned ranker: a pairwise model (RankNet with a linear scorer) over the features
of ``slm.learn.features`` and their pairwise products, written in numpy.

A candidate's features ``f`` are expanded to ``x = (f_1..f_n, f_i * f_j for i <= j)``, so
that the model can weigh one feature by another (a neighbour's relevance counts more for
a turn that says little itself). Its score is ``w . (x - mean) / scale``; training
minimises the pairwise logistic loss over (useful, not useful) pairs of one recall, each
recall weighing the same, plus a pull toward prior weights ``w0``::

    loss(w) = sum over recalls q of  1/|P_q| * sum over (i, j) in P_q of
                  log(1 + exp(-(s(x_i) - s(x_j))))
              + l2 / 2 * |w - w0|^2

solved by Newton's method with a line search (the loss is convex; 377 weights). With ``w0``
the shipped model's weights, a profile's own feedback moves the ranker only as far as that
feedback supports. Why not gradient-boosted trees: docs/learning.md. A model reranks only
windows like its training data (:meth:`Ranker.applies`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from slm.errors import ModelError
from slm.learn.features import FEATURES, feature_names

FORMAT = "slm-ranker"
FORMAT_VERSION = 1
#: The most :meth:`Ranker.shift` a window may have for the model to rerank it. Measured from
#: the nearest of the model's anchors (one per kind of store it was trained on), windows of a
#: kind it was trained on measure about 0.3 at the median; windows of another kind about 1.
#: Of 0.6, 0.75 and 0.9, in the leave-one-group-out test on both dev files with one model
#: for both, 0.75 reranked 96-98% of the windows and lost nothing against 0.9 (docs/learning.md).
SHIFT_LIMIT = 0.75


@dataclass(frozen=True, slots=True)
class Layout:
    """The expanded columns of a list of features: each feature, then the product of each
    pair (i <= j); and the features :meth:`Ranker.shift` compares (all but the profile's
    own feedback, which no shipped model has seen)."""

    columns: tuple[str, ...]
    left: np.ndarray
    right: np.ndarray
    shaped: np.ndarray


@lru_cache(maxsize=8)
def layout(features: tuple[str, ...] = FEATURES) -> Layout:
    pairs = [(i, j) for i in range(len(features)) for j in range(i, len(features))]
    return Layout(
        (*features, *(f"{features[i]}*{features[j]}" for i, j in pairs)),
        np.array([i for i, _ in pairs], dtype=np.int64),
        np.array([j for _, j in pairs], dtype=np.int64),
        np.array([i for i, f in enumerate(features) if not f.startswith("marked_")]),
    )


#: The expanded columns of the shipped channels' features.
COLUMNS: tuple[str, ...] = layout().columns


def expand(matrix: np.ndarray, features: tuple[str, ...] = FEATURES) -> np.ndarray:
    """Feature rows with the products of each pair of features appended (:func:`layout`)."""
    shape = layout(features)
    return np.hstack([matrix, matrix[:, shape.left] * matrix[:, shape.right]])


def project(matrix: np.ndarray, names: Sequence[str], features: Sequence[str]) -> np.ndarray:
    """The columns ``features`` of ``matrix`` whose columns are ``names`` (0 for a feature
    it does not have): a window computed with a channel the model never saw, read as the
    model knows it."""
    if tuple(names) == tuple(features):
        return matrix
    where = {name: i for i, name in enumerate(names)}
    out = np.zeros((len(matrix), len(features)), dtype=np.float64)
    for column, name in enumerate(features):
        if name in where:
            out[:, column] = matrix[:, where[name]]
    return out


#: The model that ships inside the package (``slm bench learning --train-default``).
DEFAULT_MODEL = "default-ranker.json"


@dataclass(frozen=True, slots=True)
class Example:
    """One recall's window as training data: feature rows (best first, as ranked before
    reranking) and a label per row: 1 useful, 0 not useful, None unknown."""

    matrix: np.ndarray
    labels: tuple[int | None, ...]


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where one kind of store the model was trained on sits: the mean and scale of each
    feature (not expanded) over its windows' rows."""

    name: str
    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def of(cls, name: str, examples: Sequence[Example], features: tuple[str, ...]) -> Anchor:
        mean, scale = standardiser(examples, features)
        return cls(name, mean[: len(features)], scale[: len(features)])


@dataclass(frozen=True, slots=True)
class Ranker:
    """A ranking model: ``score(f) = weights . (expand(f) - mean) / scale``."""

    weights: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    trained_on: str = ""
    #: the most :meth:`shift` a window may have to be reranked (None: no limit)
    shift_limit: float | None = SHIFT_LIMIT
    #: the features it was trained on, by name (``slm.learn.features.feature_names``)
    features: tuple[str, ...] = FEATURES
    #: each kind of store it was trained on (none: its own standardisation is the one)
    anchors: tuple[Anchor, ...] = ()
    #: a name for the model that changes when any of its numbers does (computed)
    id: str = field(default="", init=False, compare=False)
    #: the score as a quadratic form of the features (computed, :meth:`score`)
    _form: tuple[np.ndarray, np.ndarray, float] = field(
        init=False, repr=False, compare=False, default=(np.zeros((0, 0)), np.zeros(0), 0.0)
    )
    #: each anchor's (mean, scale) of the features :meth:`shift` compares (computed)
    _places: tuple[tuple[np.ndarray, np.ndarray], ...] = field(
        init=False, repr=False, compare=False, default=()
    )

    def __post_init__(self) -> None:
        digest = hashlib.sha256(
            json.dumps(self._numbers(), sort_keys=True).encode("utf-8")
        ).hexdigest()
        object.__setattr__(self, "id", f"ranker-{digest[:12]}")
        shape, n = layout(self.features), len(self.features)
        per = self.weights / self.scale
        pairs = np.zeros((n, n), dtype=np.float64)
        np.add.at(pairs, (shape.left, shape.right), per[n:])
        form = (pairs, per[:n].copy(), -float(per @ self.mean))
        object.__setattr__(self, "_form", form)
        places = [(a.mean, a.scale) for a in self.anchors] or [(self.mean, self.scale)]
        shaped = shape.shaped
        object.__setattr__(self, "_places", tuple((m[shaped], s[shaped]) for m, s in places))

    def shift(self, matrix: np.ndarray) -> float:
        """How unlike the training data a window is: the root mean square, over the
        features, of the window's mean standardised value, from the nearest anchor (one
        per kind of store the model was trained on; without anchors, from the model's own
        standardisation). About 0.3 for windows of a kind the model was trained on, about
        1 for another kind (measured on the dev files, docs/learning.md)."""
        if not len(matrix):
            return 0.0
        centre = matrix[:, layout(self.features).shaped].mean(axis=0)
        return min(
            float(np.sqrt(np.mean(((centre - mean) / scale) ** 2))) for mean, scale in self._places
        )

    def applies(self, matrix: np.ndarray) -> bool:
        """Whether the model may rerank this window: one unlike anything it was trained on
        (:meth:`shift` above its ``shift_limit``) keeps its order."""
        return self.allows(self.shift(matrix))

    def allows(self, shift: float) -> bool:
        """:meth:`applies` for a window whose :meth:`shift` is known."""
        return self.shift_limit is None or shift <= self.shift_limit

    def score(self, matrix: np.ndarray) -> np.ndarray:
        """One score per row of ``matrix`` (higher ranks first): ``w . (x - mean) / scale``
        of its expanded features, computed as the quadratic form it is in the features
        ``f`` (``f A f + b . f + c``, equal to within rounding): 7.5 us for a window of 40
        rows, against 174 for expanding it to its 560 columns first."""
        pairs, linear, constant = self._form
        scores: np.ndarray = np.einsum("ij,ij->i", matrix @ pairs, matrix)
        scores += matrix @ linear + constant
        return scores

    def view(self, matrix: np.ndarray, names: Sequence[str]) -> np.ndarray:
        """``matrix`` (columns ``names``) in this model's columns: :func:`project`."""
        return project(matrix, names, self.features)

    def _numbers(self) -> dict[str, Any]:
        return {
            "shift_limit": self.shift_limit,
            "features": list(self.features),
            "anchors": [
                {
                    "name": a.name,
                    "mean": [round(float(v), 10) for v in a.mean],
                    "scale": [round(float(v), 10) for v in a.scale],
                }
                for a in self.anchors
            ],
            "mean": [round(float(v), 10) for v in self.mean],
            "scale": [round(float(v), 10) for v in self.scale],
            "weights": [round(float(v), 10) for v in self.weights],
        }

    def to_data(self) -> dict[str, Any]:
        """The model as the JSON object its file holds."""
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "kind": "pairwise-quadratic",
            "trained_on": self.trained_on,
            **self._numbers(),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_data(), indent=1)

    @classmethod
    def from_json(cls, text: str, where: str = "model") -> Ranker:
        """A model from its JSON; :class:`ModelError` saying what is wrong otherwise."""
        try:
            data = json.loads(text)
        except (ValueError, TypeError) as exc:
            raise ModelError(f"{where} is not a ranking model (not JSON: {exc})") from None
        return cls.from_data(data, where)

    @classmethod
    def from_data(cls, data: Any, where: str = "model") -> Ranker:
        """A model from its JSON object (:meth:`to_data`); :class:`ModelError` otherwise."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ModelError(f"{where} is not a ranking model (format is not {FORMAT!r})")
        if data.get("version") != FORMAT_VERSION:
            raise ModelError(
                f"{where} is a ranking model of format version {data.get('version')!r}; "
                f"this slm reads version {FORMAT_VERSION}"
            )
        features = data.get("features")
        if (
            not isinstance(features, list)
            or not features
            or not all(isinstance(f, str) for f in features)
            or len(set(features)) != len(features)
        ):
            raise ModelError(f"{where}: 'features' must be a list of distinct feature names")
        unknown = sorted(set(features) - set(feature_names()))
        if unknown:
            raise ModelError(
                f"{where} was trained on features this slm does not compute "
                f"({', '.join(unknown)}); retrain it (docs/learning.md)"
            )
        size = len(layout(tuple(features)).columns)
        arrays = [
            _numbers_of(data.get(name), size, f"{where}: {name!r}")
            for name in ("weights", "mean", "scale")
        ]
        weights, mean, scale = arrays
        if np.any(scale <= 0):
            raise ModelError(f"{where}: 'scale' must be positive")
        anchors = _anchors(data.get("anchors", []), len(features), where)
        limit = data.get("shift_limit", SHIFT_LIMIT)
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int | float) or not limit > 0
        ):
            raise ModelError(f"{where}: 'shift_limit' must be a positive number or null")
        trained_on = str(data.get("trained_on", ""))
        return cls(weights, mean, scale, trained_on, limit, tuple(features), anchors)

    @classmethod
    def load(cls, path: str | Path) -> Ranker:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelError(f"cannot read ranking model {path}: {exc}") from None
        return cls.from_json(text, f"ranking model {path}")


def _numbers_of(values: Any, size: int, what: str) -> np.ndarray:
    """``values`` as ``size`` finite numbers; :class:`ModelError` naming ``what`` otherwise."""
    if not isinstance(values, list) or len(values) != size:
        raise ModelError(f"{what} must be a list of {size} numbers")
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ModelError(f"{what} must hold numbers only") from None
    if not np.all(np.isfinite(array)):
        raise ModelError(f"{what} holds a number that is not finite")
    return array


def _anchors(raw: Any, size: int, where: str) -> tuple[Anchor, ...]:
    if not isinstance(raw, list):
        raise ModelError(f"{where}: 'anchors' must be a list")
    out = []
    for i, anchor in enumerate(raw):
        what = f"{where}: anchors[{i}]"
        if not isinstance(anchor, dict):
            raise ModelError(f"{what} must be an object with name, mean and scale")
        mean = _numbers_of(anchor.get("mean"), size, f"{what}.mean")
        scale = _numbers_of(anchor.get("scale"), size, f"{what}.scale")
        if np.any(scale <= 0):
            raise ModelError(f"{what}.scale must be positive")
        out.append(Anchor(str(anchor.get("name", "")), mean, scale))
    return tuple(out)


def default_ranker() -> Ranker:
    """The model that ships with slm (trained on the dev sets, docs/learning.md)."""
    text = resources.files("slm.learn").joinpath(DEFAULT_MODEL).read_text(encoding="utf-8")
    return Ranker.from_json(text, f"shipped ranking model {DEFAULT_MODEL}")


def pairs(example: Example) -> list[tuple[int, int]]:
    """(better, worse) rows of one example: each useful row over each not-useful row, and
    over each unlabelled row that was ranked above it (passed over for a lower one)."""
    useful = [i for i, label in enumerate(example.labels) if label == 1]
    out = []
    for i in useful:
        for j, label in enumerate(example.labels):
            if label == 0 or (label is None and j < i):
                out.append((i, j))
    return out


def standardiser(
    examples: Sequence[Example], features: tuple[str, ...] = FEATURES
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and scale of each feature over the examples' rows (scale 1 where constant)."""
    rows = np.vstack([expand(e.matrix, features) for e in examples if len(e.matrix)])
    mean = rows.mean(axis=0)
    scale = rows.std(axis=0)
    scale[scale < 1e-9] = 1.0
    return mean, scale


def fit(
    examples: Sequence[Example],
    *,
    l2: float = 10.0,
    prior: Ranker | None = None,
    trained_on: str = "",
    iterations: int = 30,
    features: tuple[str, ...] | None = None,
    kinds: Mapping[str, Sequence[Example]] | None = None,
) -> Ranker:
    """Train on ``examples``, whose columns are ``features`` (default: every registered
    channel's now, :func:`feature_names`); see the module docstring. With ``prior`` its
    features, standardisation and weights are kept as the starting point and the pull;
    without, the examples set the standardisation and the pull is toward 0. ``kinds``:
    the examples grouped by the kind of store they come from (a file of the dev data, say),
    each made an :class:`Anchor` of the model's guard; with a prior, its anchors are kept.
    Deterministic."""
    names = feature_names() if features is None else features
    limit = prior.shift_limit if prior is not None else SHIFT_LIMIT
    if prior is not None:
        mean, scale, w0 = prior.mean, prior.scale, prior.weights
        examples = [Example(prior.view(e.matrix, names), e.labels) for e in examples]
        names, anchors = prior.features, prior.anchors
    else:
        mean, scale = standardiser(examples, names)
        w0 = np.zeros(len(layout(names).columns))
        anchors = tuple(Anchor.of(kind, group, names) for kind, group in (kinds or {}).items())
    diffs, weights = [], []
    for example in examples:
        found = pairs(example)
        if not found:
            continue
        z = (expand(example.matrix, names) - mean) / scale
        better, worse = zip(*found, strict=True)
        diffs.append(z[list(better)] - z[list(worse)])
        weights.append(np.full(len(found), 1.0 / len(found)))
    if not diffs:
        return Ranker(w0.copy(), mean, scale, trained_on, limit, names, anchors)
    d = np.vstack(diffs)
    c = np.concatenate(weights)

    def loss(w: np.ndarray) -> float:
        penalty = 0.5 * l2 * float((w - w0) @ (w - w0))
        return float(c @ np.logaddexp(0.0, -(d @ w))) + penalty

    w = w0.copy()
    eye = np.eye(len(w))
    current = loss(w)
    for _ in range(iterations):
        margin = d @ w
        p = 0.5 * (1.0 + np.tanh(-0.5 * margin))  # sigmoid(-margin), without overflow
        gradient = -(d.T @ (c * p)) + l2 * (w - w0)
        hessian = (d.T * (c * p * (1.0 - p))) @ d + l2 * eye
        step = np.linalg.solve(hessian, gradient)
        # Newton's step, halved until the loss falls (a full step can overshoot).
        for _ in range(30):
            candidate = w - step
            after = loss(candidate)
            if after <= current:
                break
            step = step / 2
        else:
            break
        w, improved = candidate, current - after
        current = after
        if improved < 1e-10 * max(1.0, abs(current)):
            break
    return Ranker(w, mean, scale, trained_on, limit, names, anchors)


def order(
    ranker: Ranker | None, example: Example, features: tuple[str, ...] | None = None
) -> list[int]:
    """Rows of ``example`` (columns ``features``, default :func:`feature_names`) best
    first: by the model's score (ties: the earlier row), or as they are without a model or
    where it does not apply (:meth:`Ranker.applies`)."""
    if ranker is None or not len(example.matrix):
        return list(range(len(example.matrix)))
    matrix = ranker.view(example.matrix, feature_names() if features is None else features)
    if not ranker.applies(matrix):
        return list(range(len(example.matrix)))
    scores = ranker.score(matrix)
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))
