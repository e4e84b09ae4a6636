"""Retrieval score contract v2: the shape of every recall response.

Per result: ``relevance_score`` (0..1, query-relative evidence; comparable only within one
slm release and configuration), ``ranking_score`` (the ordering key: fused rank score plus
any adjustment; unbounded, diagnostic), ``memory_confidence`` (stored with the memory),
``trust_score`` (Beta posterior on the memory's source), ``rank_position`` (1-based).
Additive fields beside them: the memory's validity (``valid_from``, ``valid_to``,
``superseded_by``) and ``possibly_superseded_by`` (docs/lifecycle.md). The
legacy aliases ``score`` and ``confidence`` are emitted unless ``legacy_aliases`` is off.
Per response: version, the ``query_id`` feedback names it by, calibration fields
(uncalibrated, with a null ``answer_confidence``, unless a calibration artefact that passed
the release gate is loaded: docs/calibration.md), abstention, results and, on request, the
trace. :class:`RecallSignals` is what a calibration reads from a recall; it is not in the
response body (a trace with a calibration loaded shows it). :func:`abstention_words` says
why a response abstained, for the command line and the page alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slm.models import MemoryRecord

SCORE_CONTRACT_VERSION = "2"
NO_CANDIDATES = "no_candidates"
EVIDENCE_FLOOR = "evidence_floor"
#: the calibrated ``answer_confidence`` is below the threshold of the artefact's declared
#: selective-risk target (the results are kept)
SELECTIVE_RISK = "selective_risk"
#: Each abstention reason in words.
ABSTENTION_WORDS = {
    NO_CANDIDATES: "Nothing stored matches this at all: no channel found a candidate.",
    EVIDENCE_FLOOR: (
        "Nothing stored answers this well enough: no memory passed the evidence floor (none "
        "is similar enough, shares enough of the question's words or falls in its time window)."
    ),
    SELECTIVE_RISK: (
        "Abstained: the calibrated chance that these results hold the answer is below the "
        "calibration's risk threshold. The results are shown for reference."
    ),
}


@dataclass(frozen=True, slots=True)
class ChannelRank:
    """Provenance: where one channel ranked a result, and its raw score there."""

    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class RecallResult:
    memory: MemoryRecord
    relevance_score: float
    ranking_score: float
    trust_score: float
    rank_position: int
    channels: Mapping[str, ChannelRank] = field(default_factory=dict)
    #: ids of memories found to give a newer value for a fact this one states (probable
    #: updates, ``slm.ingest.facts``), for the caller to judge
    possibly_superseded_by: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.memory.id

    @property
    def memory_confidence(self) -> float:
        return self.memory.confidence

    def to_dict(self, legacy_aliases: bool = True) -> dict[str, Any]:
        out = self.memory.to_dict()
        del out["confidence"]
        out.update(
            relevance_score=round(self.relevance_score, 6),
            ranking_score=round(self.ranking_score, 8),
            memory_confidence=self.memory.confidence,
            trust_score=round(self.trust_score, 6),
            rank_position=self.rank_position,
            possibly_superseded_by=list(self.possibly_superseded_by),
        )
        if legacy_aliases:
            out["score"] = out["relevance_score"]
            out["confidence"] = out["memory_confidence"]
        return out


@dataclass(frozen=True, slots=True)
class RecallSignals:
    """What a recall knows about how well its top ``k`` answers the question, in the order
    of :data:`SIGNALS`: the input of a calibration (``slm.calibrate``)."""

    values: tuple[float, ...]
    #: the ``k`` the recall was asked for
    k: int

    def named(self) -> dict[str, float]:
        return dict(zip(SIGNALS, self.values, strict=True))


#: The names of :attr:`RecallSignals.values` (docs/calibration.md says what each is).
SIGNALS = (
    "top_relevance",
    "second_relevance",
    "relevance_margin",
    "mean_relevance",
    "top_cosine",
    "top_lexical",
    "best_lexical",
    "agreement",
    "channels_ran",
    "result_share",
    "primary_share",
    "passed_share",
    "time_match",
    "unknown_entities",
    "query_terms",
)


@dataclass(frozen=True, slots=True)
class RecallResponse:
    query: str
    results: tuple[RecallResult, ...]
    abstained: bool
    abstention_reason: str | None
    trace: Mapping[str, Any] | None = None
    legacy_aliases: bool = True
    #: names this recall for feedback (``Memory.feedback(..., query_id=...)``)
    query_id: str | None = None
    #: what a calibration reads (not in the body; shown in a calibrated trace)
    signals: RecallSignals | None = None
    #: set together, by a loaded calibration artefact only (docs/calibration.md)
    calibration_id: str | None = None
    answer_confidence: float | None = None

    def __len__(self) -> int:
        return len(self.results)

    @property
    def ids(self) -> list[str]:
        return [r.memory.id for r in self.results]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "score_contract_version": SCORE_CONTRACT_VERSION,
            "calibration_status": "uncalibrated" if self.calibration_id is None else "calibrated",
            "calibration_id": self.calibration_id,
            "answer_confidence": self.answer_confidence,
            "abstained": self.abstained,
            "abstention_reason": self.abstention_reason,
            "query": self.query,
            "query_id": self.query_id,
            "results": [r.to_dict(self.legacy_aliases) for r in self.results],
        }
        if self.trace is not None:
            out["trace"] = dict(self.trace)
        return out


def abstention_words(
    response: RecallResponse, minimum: float | None, asked: str = "the minimum asked for"
) -> str | None:
    """Why ``response`` abstained, in words (None: it did not); with the caller's ``minimum``
    relevance (None: none was given) the floor it raised is named with it, as ``asked``
    (how the caller gave it)."""
    if not response.abstained:
        return None
    if response.abstention_reason == EVIDENCE_FLOOR and minimum is not None:
        return (
            "Nothing stored answers this well enough: no memory passed the evidence floor "
            f"with a relevance of at least {minimum:g}, {asked}."
        )
    return ABSTENTION_WORDS.get(response.abstention_reason or "", "Nothing found.")
