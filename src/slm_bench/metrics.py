"""Retrieval metrics as pure functions (hand-checked in tests/test_bench.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def hit_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """1 if any relevant id is among the first ``k``, else 0."""
    return 1.0 if any(r in relevant for r in ranked[:k]) else 0.0


def recall_at(ranked: Sequence[str], relevant: set[str], k: int) -> float:
    """Fraction of the relevant ids found among the first ``k``."""
    if not relevant:
        return 0.0
    return len(relevant & set(ranked[:k])) / len(relevant)


def reciprocal_rank(ranked: Sequence[str], relevant: set[str], k: int = 10) -> float:
    """1 / rank of the first relevant id within the first ``k``; 0 if none."""
    for position, item in enumerate(ranked[:k], start=1):
        if item in relevant:
            return 1.0 / position
    return 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default method), q in 0..100."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """Area under the ROC curve: the probability that a random positive outscores a random
    negative, ties counting one half (Mann-Whitney U / (n_pos * n_neg))."""
    if not positives or not negatives:
        return math.nan
    scored = sorted([(s, 1) for s in positives] + [(s, 0) for s in negatives])
    rank_sum, i = 0.0, 0
    while i < len(scored):
        j = i
        while j < len(scored) and scored[j][0] == scored[i][0]:
            j += 1
        mid_rank = (i + 1 + j) / 2.0  # average 1-based rank of the tie group
        rank_sum += mid_rank * sum(label for _, label in scored[i:j])
        i = j
    n_pos, n_neg = len(positives), len(negatives)
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def mcnemar_p(gained: int, lost: int) -> float:
    """Two-sided exact McNemar test: the probability, if switching made no difference, of a
    split of the ``gained + lost`` discordant pairs at least this uneven (binomial, p = 1/2)."""
    n = gained + lost
    if n == 0:
        return 1.0
    tail: float = sum(math.comb(n, i) for i in range(min(gained, lost) + 1)) / 2**n
    return min(1.0, 2 * tail)
