"""Reranking one recall: score the window's features with a model and give the window new
ranking scores in that order, above every candidate outside it.

Only ``ranking_score`` and the order change: the contract's ``relevance_score``, the
evidence floor and abstention are decided before and do not look at the model.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from slm.learn.features import Candidates
from slm.learn.model import Ranker


@dataclass(frozen=True, slots=True)
class Reranking:
    """What a recall reranks with: the model (None: features are only observed), its
    id and where it comes from (``"default"``, ``"file"`` or ``"profile"``), and an
    optional observer of each window (how feedback and the benchmarks read features)."""

    ranker: Ranker | None
    model_id: str | None = None
    origin: str = "default"
    observe: Callable[[Candidates], None] | None = None
    #: only feedback given before this moment (microseconds) counts among the features
    #: (reading a logged recall again: what came after it, its own labels included, could
    #: not have been known when it ran)
    marks_before: int | None = None


def reorder(
    ranking: Mapping[int, float], keys: Sequence[int], scores: np.ndarray
) -> dict[int, float]:
    """``ranking`` with ``keys`` (a window at its top, best first) scored by ``scores``
    (ties: the earlier key)::

        ranking_score(d) = top_outside + 1e-6 + (score(d) - min score) * (1 + 1e-9 * ...)

    so the window keeps its place above the rest, ordered by the model."""
    out = dict(ranking)
    if not keys:
        return out
    inside = set(keys)
    outside = max((score for key, score in ranking.items() if key not in inside), default=0.0)
    low = float(scores.min())
    count = len(keys)
    for i, key in enumerate(keys):
        # A tiny step by position breaks exact ties in favour of the earlier key.
        out[key] = outside + 1e-6 + float(scores[i]) - low + 1e-9 * (count - i)
    return out
