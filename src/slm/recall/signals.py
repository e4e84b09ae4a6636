"""What a recall knows about how well its top ``k`` answers the question: the inputs of a
calibration (``slm.calibrate``; docs/calibration.md lists them)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from slm.channels import Hit, Query
from slm.contract import SIGNALS, RecallSignals
from slm.recall.evidence import Evidence


def recall_signals(
    query: Query,
    evidence: Mapping[int, Evidence],
    passed: Mapping[int, str],
    rankings: Mapping[str, Sequence[Hit]],
    ordered: Sequence[int],
    k: int,
) -> RecallSignals:
    """The signals of a recall of ``query`` that returned ``ordered`` (keys, best first) of
    the ``evidence`` weighed for its fused candidates, ``passed`` of which passed the
    floor."""
    shown = [evidence[key] for key in ordered]
    relevance = [e.relevance for e in shown]
    top = shown[0] if shown else None
    first = relevance[0] if relevance else 0.0
    second = relevance[1] if len(relevance) > 1 else 0.0
    found_top = 0
    if ordered:
        found_top = sum(1 for hits in rankings.values() if any(h.key == ordered[0] for h in hits))
    values = (
        first,
        second,
        first - second,
        sum(relevance) / len(relevance) if relevance else 0.0,
        top.cosine if top else 0.0,
        top.lexical if top else 0.0,
        max((e.lexical for e in shown), default=0.0),
        found_top / len(rankings) if shown and rankings else 0.0,
        float(len(rankings)),
        len(shown) / k,
        sum(1 for key in ordered if passed.get(key) == "primary") / len(shown) if shown else 0.0,
        len(passed) / len(evidence) if evidence else 0.0,
        1.0 if top is not None and top.temporal else 0.0,
        # a question about people or things the store never mentions is seldom answered
        sum(1 for name in query.entities if not query.entity_ids.get(name))
        / max(1, len(query.entities)),
        math.log1p(len(query.terms)),
    )
    assert len(values) == len(SIGNALS)
    return RecallSignals(tuple(float(v) for v in values), k)
