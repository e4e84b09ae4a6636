"""Ingest as one stage: memories the engine has checked become memories ready to store,
with everything slm derives from them (docs/architecture.md, the write path).

:func:`prepare` serves every write (``remember``, ``remember_many``, conversations,
imports): the text embedded (a long text as passages), its standing statements, its
semantic neighbours among stored memories and the rest of its batch, the facts it states
and the earlier memories it probably changes, then the derived fields
(:func:`slm.ingest.with_derived`: terms, entities, dates, session). :func:`rederive` is
the same stage over memories already stored (``reindex``): their stored vectors are kept,
only a text longer than the model's window is embedded again, and neighbours are looked
for among earlier memories only, as they were when each was stored.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from slm.embed import Embedder, Matrix, embed_passages, reads_passages
from slm.ingest import (
    SEMANTIC_LINK_FLOOR,
    SEMANTIC_LINKS,
    nearest_stored,
    semantic_links,
    with_derived,
)
from slm.ingest.changes import probable
from slm.ingest.facts import facts
from slm.ingest.standing import embedded_statements
from slm.models import MemoryRecord, NewMemory, content_hash
from slm.store import Store
from slm.store.base import MAX_PASSAGES


def prepare(
    store: Store, profile: str, embedder: Embedder, fresh: Sequence[NewMemory]
) -> list[NewMemory]:
    """``fresh`` (checked, none of them stored yet) ready to store, in order."""
    texts = [item.content for item in fresh]
    passages = embed_passages(embedder, texts, MAX_PASSAGES)
    embedded = firsts(passages, embedder.dim)
    standing = embedded_statements(embedder, texts, [item.source for item in fresh])
    nearest = nearest_stored(store, profile, embedded)
    links = semantic_links(embedded, nearest)
    stated = [facts(item.content, item.source) for item in fresh]
    found = probable(store, profile, fresh, embedded, nearest, stated)
    return [
        with_derived(item, p, stored, batch, statements, changes, said)
        for item, p, (stored, batch), statements, changes, said in zip(
            fresh, passages, links, standing, found, stated, strict=True
        )
    ]


def rederive(
    store: Store, profile: str, embedder: Embedder, records: Sequence[MemoryRecord]
) -> list[tuple[int, NewMemory]]:
    """Stored ``records`` derived again (key, memory), from their stored vectors."""
    vectors = store.vectors.get(profile, [r.key for r in records])
    # Only a text longer than the model's window has passages beyond its first one (a
    # word piece is at least one character): no other text is embedded again.
    long = [r for r in records if reads_passages(embedder, r.content)]
    embedded = embed_passages(embedder, [r.content for r in long], MAX_PASSAGES)
    further = {r.key: p[1:] for r, p in zip(long, embedded, strict=True)}
    standing = embedded_statements(
        embedder, [r.content for r in records], [r.source for r in records]
    )
    out = []
    for record, vector, statements in zip(records, vectors, standing, strict=True):
        # Only earlier memories, as at ingest: a rebuild gives the same graph (up to the
        # half-precision rounding of a graph-indexed profile's vectors).
        neighbours = tuple(
            (key, score)
            for key, score in store.vectors.search(
                profile, vector, SEMANTIC_LINKS, None, below=record.key
            )
            if score >= SEMANTIC_LINK_FLOOR
        )
        rest = further.get(record.key)
        passages = vector[None, :] if rest is None else np.vstack([vector[None, :], rest])
        derived = with_derived(_as_new(record), passages, neighbours, (), statements)
        out.append((record.key, derived))
    return out


def firsts(passages: Sequence[Matrix], dim: int) -> Matrix:
    """The first passage of each text: its own vector."""
    if not passages:
        return np.zeros((0, dim), dtype=np.float32)
    return np.stack([p[0] for p in passages]).astype(np.float32)


def _as_new(record: MemoryRecord) -> NewMemory:
    return NewMemory(
        content=record.content,
        content_hash=content_hash(record.content),
        event_time=record.event_time,
        recorded_at=record.recorded_at,
        source=record.source,
        confidence=record.confidence,
        metadata=record.metadata,
        tags=record.tags,
        terms=(),
        vector=b"",
        id=record.id,
    )
