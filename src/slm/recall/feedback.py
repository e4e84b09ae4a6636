"""What use teaches at once: a memory marked not useful for a question moves down for that
question and questions like it on the very next recall; one marked useful moves up. No
model is refit and ``relevance_score`` is untouched: only ``ranking_score`` and order move.

Two questions are alike when their index terms overlap (Jaccard) by at least
:data:`ALIKE`. For each of the leading results, the labels it got for alike questions add
up, each weighted by how alike its question is: ``net = sum(+-overlap)``. The result's
ranking score moves by ``STEP * net`` times the leading score (down for a negative net, up
for a positive one, at most :data:`MOST` steps either way), so one label nudges, and a few
agreeing labels decide.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence

from slm.ingest.text import terms
from slm.models import MemoryRecord

#: How alike (term overlap) a labelled question must be to count for this one.
ALIKE = 0.5
#: How far one label of an identical question moves a result, in leading scores.
STEP = 0.25
#: At most this many steps either way.
MOST = 8.0
#: How many of the leading results are looked up.
LEADING = 20


def alike(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard overlap of two questions' term sets."""
    return len(a & b) / len(a | b) if a and b else 0.0


def nets(question: str, asked: Mapping[str, Sequence[tuple[bool, str]]]) -> dict[str, float]:
    """Per memory id, the weighted sum of its labels for questions alike ``question``
    (+overlap for useful, -overlap for not useful); memories with none are left out."""
    mine = frozenset(terms(question))
    out: dict[str, float] = {}
    seen: dict[str, frozenset[str]] = {}
    for memory_id, labels in asked.items():
        total = 0.0
        for useful, other in labels:
            overlap = alike(mine, seen.setdefault(other, frozenset(terms(other))))
            if overlap >= ALIKE:
                total += overlap if useful else -overlap
        if total:
            out[memory_id] = max(-MOST, min(MOST, total))
    return out


def apply(
    ranking: MutableMapping[int, float],
    records: Mapping[int, MemoryRecord],
    net: Mapping[str, float],
    leading: Sequence[int],
) -> dict[int, float]:
    """Move each of ``leading`` by its net label (:func:`nets`); returns the shift applied
    per key."""
    if not net or not leading:
        return {}
    scale = max(abs(ranking[key]) for key in leading) or 1.0
    shifts: dict[int, float] = {}
    for key in leading:
        value = net.get(records[key].id) if key in records else None
        if value:
            shifts[key] = STEP * value * scale
            ranking[key] += shifts[key]
    return shifts
