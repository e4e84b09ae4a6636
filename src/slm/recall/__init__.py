"""The read path: one recall, step by step, each step a module.

    interpret   text -> Query (terms, entities, time window, the text to embed)
    run         the channels: the standalone ones while the question is embedded, then the rest
    fusion      pure scoring functions: weighted RRF, relevance, boosts, trust
    evidence    relevance_score and the evidence floor (abstention)
    enhance     boosts after fusion: entity graph, role
    pipeline    fuse -> evidence -> floor -> enhance -> rerank -> hydrate -> the contract
                response (the reranker and its features: ``slm.learn``)
    trace       what happened, for ``trace=True``

:func:`recall` strings them together; ``slm.engine.Memory.recall`` validates its arguments
and calls it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import replace
from datetime import datetime

from slm.channels import Channel, Context, Query, enabled
from slm.contract import RecallResponse
from slm.embed import Matrix
from slm.index import Indexes
from slm.learn.rerank import Reranking
from slm.recall.interpret import interpret
from slm.recall.pipeline import rank
from slm.recall.reader import Reader
from slm.recall.run import ChannelRun, run_channels, run_standalone
from slm.recall.trace import Clock
from slm.recall.versions import moment_asked
from slm.settings import Settings
from slm.store import Filters, Store

__all__ = ["ChannelRun", "recall"]


def recall(
    store: Store,
    indexes: Indexes,
    channels: Mapping[str, Channel],
    settings: Settings,
    embed: Callable[[str], Future[Matrix]],
    *,
    profile: str,
    text: str,
    k: int,
    now: datetime,
    filters: Filters,
    allowed: frozenset[int] | None,
    hide_superseded: bool,
    want_trace: bool,
    reranking: Reranking | None = None,
    reader: Reader | None = None,
    min_relevance: float | None = None,
) -> tuple[RecallResponse, list[ChannelRun]]:
    """One recall of validated arguments, and the run of each channel. ``embed`` starts
        embedding a text in another thread (onnxruntime releases the GIL), so that this one
        reads the query's postings and runs the standalone channels meanwhile. With
        ``hide_superseded``, memories superseded by the moment the question asks about are
        left out (``slm.recall.versions``); ``reranking`` reorders the top with a learned model
    (``slm.learn``); results below ``min_relevance`` are left out. The trace's ``timings_ms``
    says where the time went, step by step."""
    clock = Clock()
    names = enabled(settings)
    per_channel = settings.candidates_per_channel
    with store.reading(profile):  # other processes' commits checked once per recall
        query, lexicon = interpret(store, profile, text, now, filters, allowed)
        embedding = embed(query.embedded_text)
        clock.lap("interpret")
        query = _with_versions(store, query, hide_superseded)
        context = Context(store, indexes, query, lexicon)
        try:
            lexicon.prefetch()
            early = run_standalone(channels, names, context, per_channel)
            clock.lap("while embedding")
        finally:
            vector = embedding.result()[0]
        clock.lap("embedding wait")
        context.query = replace(query, vector=vector)
        runs = run_channels(channels, names, context, per_channel, early)
        clock.lap("channels")
        response = rank(
            context,
            channels,
            runs,
            settings,
            k,
            want_trace=want_trace,
            clock=clock,
            reranking=reranking,
            reader=reader,
            min_relevance=min_relevance,
        )
    return response, runs


def _with_versions(store: Store, query: Query, hide_superseded: bool) -> Query:
    """``query`` knowing whether its profile holds versions and, with
    ``hide_superseded``, which memories had been superseded by the moment it asks about."""
    if not store.versions.exist(query.profile):
        return replace(query, versioned=False)
    moment = moment_asked(query)
    if not hide_superseded or moment is None:
        return query
    return replace(query, hidden=frozenset(store.versions.superseded(query.profile, moment)))
