"""Ranking a recall whose channels ran, as a list of stages (:data:`STAGES`) over one
:class:`Ranking`: fuse, carry newer versions forward, weigh the evidence and apply the
floor, boost, rerank, read, apply what feedback teaches, put current versions first, leave
out what is below the caller's minimum relevance; then the top ``k`` as the score-contract
response. Each stage that explains itself returns its
part of the trace."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from slm.channels import Channel, Context, Hit, Query, weight
from slm.contract import EVIDENCE_FLOOR, NO_CANDIDATES, ChannelRank, RecallResponse, RecallResult
from slm.learn.features import Candidates, candidates, read_features, turns_before, window
from slm.learn.rerank import Reranking, reorder
from slm.models import MemoryRecord
from slm.recall import feedback, fusion, versions
from slm.recall.enhance import BOOSTED, entity_graph_boosts, fact_boosts, role_boosts
from slm.recall.evidence import Evidence, admitted, weigh_evidence
from slm.recall.reader import Reader
from slm.recall.run import ChannelRun
from slm.recall.signals import recall_signals
from slm.recall.trace import Clock, interpretation, result_trace, run_trace, trace_ids
from slm.settings import Settings
from slm.store import Store, Update


@dataclass
class Ranking:
    """One recall's ranking as the stages of :func:`rank` leave it: what each read and
    wrote, in the order they run."""

    context: Context
    channels: Mapping[str, Channel]
    settings: Settings
    reranking: Reranking | None
    reader: Reader | None
    #: the channels' hits, by channel, and their fusion weights
    rankings: Mapping[str, Sequence[Hit]]
    weights: dict[str, float] = field(default_factory=dict)
    fused: dict[int, float] = field(default_factory=dict)
    #: the moment whose versions are current, the updates around the leaders, and the
    #: current versions carried forward (key -> the candidates it is the current version
    #: of), and those whose relevance is one of theirs (key -> the candidate it is from)
    moment: datetime | None = None
    updates: list[Update] = field(default_factory=list)
    carried: dict[int, tuple[int, ...]] = field(default_factory=dict)
    inherited: dict[int, int] = field(default_factory=dict)
    evidence: dict[int, Evidence] = field(default_factory=dict)
    passed: dict[int, str] = field(default_factory=dict)
    boosts: dict[int, float] = field(default_factory=dict)
    roles: dict[int, float] = field(default_factory=dict)
    facts: dict[int, float] = field(default_factory=dict)
    #: the ranking score of every candidate still ranked
    ranking: dict[int, float] = field(default_factory=dict)
    #: the memories read so far, by key
    records: dict[int, MemoryRecord] = field(default_factory=dict)
    #: the reranker's window (its features), when it read one
    seen: Candidates | None = None
    #: the caller's minimum relevance (None: no minimum)
    min_relevance: float | None = None

    @property
    def query(self) -> Query:
        return self.context.query

    @property
    def store(self) -> Store:
        return self.context.store

    def hydrate(self, keys: Iterable[int]) -> None:
        """Read into :attr:`records` those of ``keys`` it does not hold yet."""
        missing = [key for key in keys if key not in self.records]
        if missing:
            self.records.update(self.store.get_by_keys(self.query.profile, missing))


def fuse(state: Ranking) -> dict[str, Any]:
    """Weighted reciprocal-rank fusion of the channels' rankings (recall/fusion.py)."""
    settings = state.settings
    state.weights = {name: weight(settings, state.channels[name]) for name in state.rankings}
    state.fused = fusion.weighted_rrf(state.rankings, state.weights, settings.rrf_k)
    return {"method": "weighted_rrf", "k": settings.rrf_k, "weights": dict(state.weights)}


def carry_versions(state: Ranking) -> None:
    """The newer versions of the leading candidates, carried forward to the moment asked
    about (recall/versions.py; nothing in a store without versions)."""
    query = state.query
    state.moment = versions.moment_asked(query)
    leading = fusion.order(state.fused)[: versions.LEADING] if query.versioned else []
    state.updates = versions.versions(state.store, query.profile, leading)
    if state.moment:
        state.carried = versions.carry_forward(state.fused, state.updates, query, state.moment)


def weigh(state: Ranking) -> dict[str, Any]:
    """Each candidate's evidence (its ``relevance_score``) and the floor (recall/evidence.py)."""
    applies = _by_role(state.channels, state.rankings, "applies")
    state.evidence = weigh_evidence(state.context, list(state.fused), state.settings, applies)
    # The current version of a fact answers as strongly as the versions it replaces.
    state.inherited = versions.inherit(state.evidence, state.carried)
    supports = _by_role(state.channels, state.rankings, "supports")
    state.passed = admitted(state.context, state.evidence, supports)
    # The current version of a fact stays when an older version passes the floor.
    state.passed.update(
        (key, "newer version")
        for key, olders in state.carried.items()
        if key not in state.passed and any(older in state.passed for older in olders)
    )
    return {
        "semantic_cosine": state.settings.semantic_floor,
        "lexical_coverage": state.settings.lexical_floor,
        "candidates": len(state.evidence),
        "passed": len(state.passed),
    }


def boost(state: Ranking) -> None:
    """The ranking score of what passed: fused score, entity-graph, role and fact boosts,
    and the evidence (recall/enhance.py). Superseded memories rank until the end, so that
    their current versions can take their places (:func:`place_current`)."""
    settings, fused, evidence = state.settings, state.fused, state.evidence
    survivors = {key: fused[key] for key in state.passed}
    leading = dict.fromkeys(fusion.order(survivors)[:BOOSTED])
    boosted = {key: survivors[key] for key in leading}
    state.records = state.store.get_by_keys(state.query.profile, leading)
    state.boosts = entity_graph_boosts(state.context, boosted, evidence, settings)
    state.roles = role_boosts(state.context, state.records, evidence, settings)
    state.facts = fact_boosts(state.context, survivors, settings)
    state.ranking = {
        key: score
        + state.boosts.get(key, 0.0)
        + state.roles.get(key, 0.0)
        + state.facts.get(key, 0.0)
        + settings.evidence_weight * evidence[key].relevance
        for key, score in survivors.items()
    }


def rerank(state: Ranking) -> dict[str, Any]:
    """The learned reranker over the top of the ranking, reading each candidate's features
    (learn/; docs/learning.md)."""
    reranking, query = state.reranking, state.query
    reordered, shift = 0, None
    if reranking is not None and state.ranking:
        keys = window(state.ranking, fusion.order(state.ranking), query.hidden)
        state.hydrate(keys)
        keys = [key for key in keys if key in state.records]
        before = turns_before(state.context, keys)
        state.hydrate(before.values())
        shown = [state.records[key].id for key in keys]
        marks = state.store.feedback.marks(query.profile, shown, reranking.marks_before)
        state.seen = candidates(
            state.context,
            keys,
            state.rankings,
            state.fused,
            state.evidence,
            state.passed,
            state.boosts,
            state.roles,
            state.facts,
            state.records,
            marks,
            before,
        )
        if reranking.observe is not None:
            reranking.observe(state.seen)
        if reranking.ranker is not None:
            matrix = reranking.ranker.view(state.seen.matrix, state.seen.features)
            shift = reranking.ranker.shift(matrix)
            if reranking.ranker.allows(shift):
                scores = reranking.ranker.score(matrix)
                state.ranking = reorder(state.ranking, state.seen.keys, scores)
                reordered = len(keys)
    ranker = reranking.ranker if reranking else None
    return {
        "model": reranking.model_id if reranking else None,
        "origin": reranking.origin if reranking and ranker else None,
        "reordered": reordered,
        # how unlike the model's training data this window is (docs/learning.md)
        "shift": None if shift is None else round(shift, 4),
        "shift_limit": ranker.shift_limit if ranker else None,
    }


def read_top(state: Ranking) -> dict[str, Any] | None:
    """A reader of the user's own, when configured, over the top (recall/reader.py)."""
    reader = state.reader
    if reader is None or not state.ranking:
        return None
    order = fusion.order(state.ranking)
    keys = [key for key in order if key not in state.query.hidden][: reader.top]
    state.hydrate(keys)
    keys = [key for key in keys if key in state.records]
    scores, ms = reader.read(state.query.text, [state.records[key].content for key in keys])
    state.ranking = reorder(state.ranking, keys, scores)
    return {**reader.describe(), "read": len(keys), "ms": round(ms, 3)}


def teach(state: Ranking) -> dict[str, float]:
    """What feedback on alike questions teaches, at once (recall/feedback.py)."""
    query = state.query
    leading = fusion.order(state.ranking)[: feedback.LEADING]
    state.hydrate(leading)
    ids = [state.records[key].id for key in leading if key in state.records]
    asked = state.store.feedback.asked(query.profile, ids)
    taught = feedback.apply(state.ranking, state.records, feedback.nets(query.text, asked), leading)
    return {
        memory.id: round(moved, 6)
        for key, moved in taught.items()
        if (memory := state.records.get(key)) is not None
    }


def place_current(state: Ranking) -> None:
    """The version that held at the moment asked about first among its versions, then
    what the question may not see left out."""
    if state.moment is not None and state.updates:
        grouped = {k for u in state.updates for k in (u.older, u.newer) if k in state.ranking}
        state.hydrate(grouped)
        versions.current_first(state.ranking, state.updates, state.records, state.moment)
    for key in state.query.hidden & state.ranking.keys():
        del state.ranking[key]


def at_least(state: Ranking) -> dict[str, Any] | None:
    """The caller's minimum relevance: candidates whose ``relevance_score`` is below it leave
    the ranking, the others keep their scores and order. Last, so that what it leaves out
    still took part in every stage, as the memories hidden by versions do."""
    minimum = state.min_relevance
    if minimum is None:
        return None
    below = [key for key in state.ranking if state.evidence[key].relevance < minimum]
    for key in below:
        del state.ranking[key]
    return {"min_relevance": minimum, "left_out": len(below)}


#: The stages of a ranking, in order, each with the name its trace part goes under (None:
#: it adds nothing to the trace).
STAGES: tuple[tuple[str | None, Callable[[Ranking], Any]], ...] = (
    ("fusion", fuse),
    (None, carry_versions),
    ("evidence_floor", weigh),
    (None, boost),
    ("rerank", rerank),
    ("reader", read_top),
    ("feedback", teach),
    (None, place_current),
    ("min_relevance", at_least),
)


def rank(
    context: Context,
    channels: Mapping[str, Channel],
    runs: Sequence[ChannelRun],
    settings: Settings,
    k: int,
    *,
    want_trace: bool,
    clock: Clock,
    reranking: Reranking | None = None,
    reader: Reader | None = None,
    min_relevance: float | None = None,
) -> RecallResponse:
    """The response of a recall whose channels ran (``runs``): the :data:`STAGES` over one
    :class:`Ranking`, then the top ``k`` hydrated, each part of the trace from its stage
    (on demand; ``clock`` times each stage). When nothing reaches ``min_relevance`` the
    response abstains as when nothing passes the evidence floor."""
    rankings = {run.name: run.hits for run in runs if run.ran}
    state = Ranking(
        context, channels, settings, reranking, reader, rankings, min_relevance=min_relevance
    )
    parts: dict[str, Any] = {}
    for name, stage in STAGES:
        part = stage(state)
        clock.lap(stage.__name__)
        if name is not None:
            parts[name] = part
    results, ordered = _results(state, k)
    clock.lap("results")
    query, evidence = context.query, state.evidence
    reason = NO_CANDIDATES if not state.fused else (EVIDENCE_FLOOR if not results else None)
    trace = None
    if want_trace:
        ids = trace_ids(context.store, query, runs)
        state.hydrate(state.inherited.values())
        inherited = {
            key: state.records[older].id
            for key, older in state.inherited.items()
            if older in state.records
        }
        trace = {
            "query": interpretation(query),
            "channels": {run.name: run_trace(run, ids) for run in runs},
            **parts,
            "results": [
                result_trace(
                    r,
                    evidence[r.memory.key],
                    state.passed,
                    {"boosts": state.boosts, "roles": state.roles, "facts": state.facts},
                    fusion.shares(r.channels, state.weights, settings.rrf_k),
                    read_features(state.seen, r.memory.key),
                    inherited.get(r.memory.key),
                )
                for r in results
            ],
            "timings_ms": clock.describe(),
            "total_ms": round(clock.total_ms(), 3),
        }
    return RecallResponse(
        query=query.text,
        results=results,
        abstained=reason is not None,
        abstention_reason=reason,
        trace=trace,
        legacy_aliases=settings.legacy_aliases,
        signals=recall_signals(query, evidence, state.passed, rankings, ordered, k),
    )


def _results(state: Ranking, k: int) -> tuple[tuple[RecallResult, ...], list[int]]:
    """The top ``k`` as results, and their keys."""
    query, records = state.query, state.records
    # A forget racing this recall can remove a candidate: hydrate, then keep what exists.
    top = fusion.order(state.ranking)[: k + 8]
    state.hydrate(top)
    ordered = [key for key in top if key in records][:k]
    updates = state.updates
    if query.versioned:
        covered = {u.older for u in updates}
        unseen = [key for key in ordered if key not in covered]
        updates = [*updates, *state.store.versions.updates(query.profile, unseen)]
    provenance = _provenance(state.rankings, ordered)
    trust = _trust(state.store, query.profile, [records[key] for key in ordered], state.settings)
    results = tuple(
        RecallResult(
            memory=records[key],
            relevance_score=state.evidence[key].relevance,
            ranking_score=state.ranking[key],
            trust_score=trust[records[key].source or ""],
            rank_position=position,
            channels=provenance[key],
            possibly_superseded_by=versions.newer_ids(updates, key),
        )
        for position, key in enumerate(ordered, start=1)
    )
    return results, ordered


def _by_role(
    channels: Mapping[str, Channel], rankings: Mapping[str, Sequence[Hit]], role: str
) -> list[Hit]:
    """The hits of the channels whose evidence role is ``role``."""
    return [hit for name, hits in rankings.items() if channels[name].role == role for hit in hits]


def _provenance(
    rankings: Mapping[str, Sequence[Hit]], keys: Sequence[int]
) -> dict[int, dict[str, ChannelRank]]:
    """Each channel's rank and score for each of ``keys`` (the results, not every hit)."""
    out: dict[int, dict[str, ChannelRank]] = {key: {} for key in keys}
    for name, hits in rankings.items():
        for hit in hits:
            if hit.key in out:
                out[hit.key][name] = ChannelRank(hit.rank, hit.score)
    return out


def _trust(
    store: Store, profile: str, records: Sequence[MemoryRecord], settings: Settings
) -> dict[str, float]:
    sources = {r.source or "" for r in records}
    counts = store.feedback.trust(profile, sources)
    return {
        s: fusion.source_trust(*counts.get(s, (0, 0)), prior=settings.trust_prior) for s in sources
    }
