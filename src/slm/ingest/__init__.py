"""Ingest: everything derived from a memory's text before it is stored, with no LLM.

For each memory: entity mentions (``entities``), dates its text refers to, resolved
against its event time (``timeexpr``), the conversation session it belongs to, and its
strong semantic neighbours among stored memories and the rest of its batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np

from slm.embed import Matrix
from slm.index.vector_cache import Vectors
from slm.ingest.changes import CANDIDATES
from slm.ingest.entities import extract_entities
from slm.ingest.facts import Fact, facts
from slm.ingest.text import terms
from slm.ingest.timeexpr import referenced_spans
from slm.models import NewMemory, to_micros
from slm.store import Store

#: At most this many semantic-neighbour edges are made per new memory...
SEMANTIC_LINKS = 3
#: ...and only to memories at least this similar (cosine, all-MiniLM-L6-v2 scale).
SEMANTIC_LINK_FLOOR = 0.6
_BLOCK = 512
#: How many times more of a profile's nearest memories are read when it holds several
#: scopes, before searching a scope's own memories alone (:func:`nearest_stored`).
WIDEN = 4
_SESSION_KEYS = ("conversation", "session")


@dataclass(frozen=True, slots=True)
class Derived:
    session: str | None
    entities: tuple[tuple[str, str, bool], ...]
    spans: tuple[tuple[int, int], ...]


def session_key(metadata: Mapping[str, Any], scope: str = "") -> str | None:
    """The conversation/session a memory belongs to, from its metadata, if it says; within
    its scope (two users' session 1 are two sessions)."""
    parts = [f"{k}={metadata[k]}" for k in _SESSION_KEYS if metadata.get(k) not in (None, "")]
    if parts and scope:
        parts.insert(0, scope)
    return ";".join(parts)[:512] if parts else None


def derive(
    content: str, event_time: datetime, metadata: Mapping[str, Any], scope: str = ""
) -> Derived:
    entities = tuple((m.key, m.kind, m.speaker) for m in extract_entities(content))
    spans = tuple(
        dict.fromkeys(
            (to_micros(s.start), to_micros(s.end)) for s in referenced_spans(content, event_time)
        )
    )
    return Derived(session_key(metadata, scope), entities, spans)


def nearest_stored(
    store: Store, index: Vectors, profile: str, vectors: Matrix, scope: str = ""
) -> list[list[tuple[int, float]]]:
    """Each new vector's nearest stored memories of its ``scope`` (key, cosine): enough for
    the semantic links and for the change reader (:data:`slm.ingest.changes.CANDIDATES`).

    In a profile of several scopes the nearest of the whole profile are read first
    (:data:`WIDEN` times as many) and those of other scopes dropped; only a vector that
    keeps fewer than it needs is searched again among its scope's memories alone, so a
    write in a large scope does not read the scope's every key."""
    if not len(vectors):
        return []
    k = max(SEMANTIC_LINKS, CANDIDATES)
    if not store.other_scopes(profile, scope):
        return index.search_many(profile, vectors, k)
    wide = index.search_many(profile, vectors, k * WIDEN)
    records = store.get_by_keys(profile, {key for found in wide for key, _ in found})
    ours = {key for key, record in records.items() if record.scope == scope}
    members: set[int] | None = None
    out = []
    for vector, found in zip(vectors, wide, strict=True):
        mine = [(key, cos) for key, cos in found if key in ours][:k]
        if len(mine) < k and len(found) == k * WIDEN:  # the scope's nearest lie further
            members = store.scope_members(profile, scope) if members is None else members
            mine = index.search(profile, vector, k, members)
        out.append(mine)
    return out


def semantic_links(
    vectors: Matrix, nearest: Sequence[Sequence[tuple[int, float]]]
) -> list[tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...]]]:
    """Strong semantic neighbours of each new vector: (stored keys, batch indexes) with cosines.

    Stored neighbours come from ``nearest`` (:func:`nearest_stored`); neighbours inside the
    batch from a blockwise similarity matrix, so memory stays bounded for large batches.
    """
    within = _batch_neighbours(vectors)
    out = [
        ([(key, score) for key, score in found if score >= SEMANTIC_LINK_FLOOR], batch)
        for found, batch in zip(nearest, within, strict=True)
    ]
    return [(tuple(s), tuple(b)) for s, b in _keep_best(out)]


def _batch_neighbours(vectors: Matrix) -> list[list[tuple[int, float]]]:
    """For each item, its most similar earlier items of the batch (later ones link back),
    computed a block of rows at a time so memory stays bounded for large batches."""
    out: list[list[tuple[int, float]]] = []
    for start in range(0, len(vectors), _BLOCK):
        rows = vectors[start : start + _BLOCK]
        sims = rows @ vectors[: start + len(rows)].T
        # Only earlier items: mask the diagonal and everything after it.
        later = (
            np.arange(start + len(rows))[None, :] >= np.arange(start, start + len(rows))[:, None]
        )
        sims[later] = -np.inf
        take = min(SEMANTIC_LINKS, sims.shape[1])
        top = np.argpartition(-sims, take - 1, axis=1)[:, :take]
        for row, cols in enumerate(top):
            pairs = [(int(c), float(sims[row, c])) for c in cols]
            pairs = [(c, s) for c, s in pairs if s >= SEMANTIC_LINK_FLOOR]
            pairs.sort(key=lambda p: (-p[1], p[0]))
            out.append(pairs)
    return out


def _keep_best(
    pairs: Sequence[tuple[list[tuple[int, float]], list[tuple[int, float]]]],
) -> list[tuple[list[tuple[int, float]], list[tuple[int, float]]]]:
    """Cap each item's neighbours at SEMANTIC_LINKS across stored and batch candidates."""
    capped = []
    for stored, batch in pairs:
        merged = sorted(
            [(s, ("k", k)) for k, s in stored] + [(s, ("b", i)) for i, s in batch],
            key=lambda p: -p[0],
        )[:SEMANTIC_LINKS]
        capped.append(
            (
                [(ref, s) for s, (kind, ref) in merged if kind == "k"],
                [(ref, s) for s, (kind, ref) in merged if kind == "b"],
            )
        )
    return capped


def with_derived(
    item: NewMemory,
    passages: Matrix,
    links: tuple[tuple[int, float], ...],
    batch_links: tuple[tuple[int, float], ...],
    standing: tuple[tuple[str, str, bytes], ...],
    changes: tuple[tuple[int, bool, str, bool], ...] = (),
    stated: Sequence[Fact] | None = None,
) -> NewMemory:
    """``item`` with everything derived from its text: terms, its vectors (``passages``,
    the first its own), entities, dates, session, facts (``stated``, when already read),
    and the links, standing statements and changes found for it."""
    if stated is None:
        stated = facts(item.content, item.source)
    derived = derive(item.content, item.event_time, item.metadata, item.scope)
    return replace(
        item,
        terms=tuple(terms(item.content)),
        vector=passages[0].astype("<f4").tobytes(),
        passages=tuple(p.astype("<f4").tobytes() for p in passages[1:]),
        standing=standing,
        session=derived.session,
        entities=derived.entities,
        spans=derived.spans,
        links=links,
        batch_links=batch_links,
        facts=tuple((f.slot, f.value) for f in stated),
        changes=changes,
    )
