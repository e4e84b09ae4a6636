"""Temporal channel: finds memories by when they happened or what dates they mention.

A question with a time expression ("in July 2024", "last week", "between May and July")
has a window (resolved by the engine against ``now``). Candidates are memories whose event
time, or a date their text refers to, falls in the window widened by half its length (at
most 31 days) on each side; they rank by::

    score = proximity * (0.25 + 0.75 * max(cos, 0)),  proximity = 1 / (1 + distance / length)

where ``distance`` is 0 inside the window and ``length`` is the window's length (at least a
day), so a memory inside the window ranks by topic, one a window-length outside by half.
A window holding more than ``WINDOW_CAP`` memories (a month of a busy store) is
searched only among the query's semantic neighbourhood and the earlier channels' hits, so
the cost stays bounded at any size. A "when did ..." question without a window instead
favours memories whose text carries a resolvable date, among the query's semantic
neighbourhood, ranked by cosine.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from slm.channels.base import (
    SHARED_NEAREST,
    ChannelDefaults,
    Context,
    Health,
    Hit,
    Need,
    Role,
    ranked,
    ranked_arrays,
)
from slm.ingest.timeexpr import query_window
from slm.models import to_micros
from slm.store import times_in

DAY_US = 86_400 * 1_000_000
MAX_MARGIN_US = 31 * DAY_US
#: A window holding more memories than this is searched only among the query's semantic
#: neighbourhood and the earlier channels' hits (bounded work at any size).
WINDOW_CAP = 1000
#: Size of the semantic neighbourhood a "when" question searches for dated memories.
WHEN_NEIGHBOURHOOD = 100


def proximity(
    starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64], window_start: int, window_end: int
) -> npt.NDArray[np.float64]:
    """For each span, 1 inside the window, decaying with distance measured in window lengths."""
    length = max(window_end - window_start, DAY_US)
    inside = (starts < window_end) & (np.maximum(ends, starts + 1) > window_start)
    before = np.where(ends <= window_start, window_start - ends, starts - window_end)
    distance = np.where(inside, 0, np.maximum(before, 0))
    out: npt.NDArray[np.float64] = 1.0 / (1.0 + distance / length)
    return out


@cache
def _self_check() -> Health:
    """Whether a month is read as its window: the same reading every time, so it runs once
    per process, not on every recall (it cost 0.09 ms a recall)."""
    probe = query_window("what happened in July 2024?", datetime(2025, 1, 1, tzinfo=UTC))
    if probe is None or probe.start != datetime(2024, 7, 1, tzinfo=UTC):
        return Health(False, "time-expression self-check failed")
    return Health(True)


class TemporalChannel(ChannelDefaults):
    name: ClassVar[str] = "temporal"
    weight: ClassVar[float] = 0.7
    needs: ClassVar[frozenset[Need]] = frozenset({"vector", "prior"})
    role: ClassVar[Role] = "plain"
    index: ClassVar[str | None] = None

    def health(self) -> Health:
        return _self_check()

    def candidates(self, context: Context, k: int) -> list[Hit]:
        if context.query.window is not None:
            return self._in_window(context, k)
        if context.query.when:
            return self._dated(context, k)
        return []

    def _in_window(self, context: Context, k: int) -> list[Hit]:
        query, store = context.query, context.store
        assert query.window is not None
        start, end = to_micros(query.window.start), to_micros(query.window.end)
        margin = min((end - start) // 2, MAX_MARGIN_US)
        found = store.time_overlaps(query.profile, start - margin, end + margin, WINDOW_CAP)
        if found is None:
            found = self._topical_in_window(context, start - margin, end + margin)
        keys = [key for key in found if query.admits(key)]
        if not keys:
            return []
        # A window can hold a thousand memories: scored as arrays, not one by one.
        vectors = context.vectors.get(query.profile, keys)
        cosines = np.asarray(vectors @ query.vector, dtype=np.float64)
        spans = np.array([found[key] for key in keys], dtype=np.int64).reshape(-1, 2)
        near = proximity(spans[:, 0], spans[:, 1], start, end)
        return ranked_arrays(
            np.array(keys, dtype=np.int64), near * (0.25 + 0.75 * np.maximum(cosines, 0.0)), k
        )

    def _topical_in_window(
        self, context: Context, start: int, end: int
    ) -> dict[int, tuple[int, int]]:
        """The window holds too many memories to rank them all: keep those of the query's
        semantic neighbourhood and of the earlier channels' hits that fall in it."""
        pool = [key for key, _ in context.nearest(SHARED_NEAREST)]
        pool += [hit.key for hits in context.prior.values() for hit in hits]
        keys = list(dict.fromkeys(pool))
        return times_in(context.store, context.query.profile, keys, start, end)

    def _dated(self, context: Context, k: int) -> list[Hit]:
        near = context.nearest(WHEN_NEIGHBOURHOOD)
        dated = context.store.referenced_times(context.query.profile, [key for key, _ in near])
        return ranked([(key, cos) for key, cos in near if key in dated], k)
