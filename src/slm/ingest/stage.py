"""Ingest as one stage: memories the engine has checked become memories ready to store,
with everything slm derives from them (docs/architecture.md, the write path).

:func:`write` stores checked memories and says what it did with each; :func:`prepare`,
its derive step, serves every write (``remember``, ``remember_many``, conversations,
imports): the text embedded (a long text as passages), its standing statements, its
semantic neighbours among stored memories and the rest of its batch, the facts it states
and the earlier memories it probably changes, then the derived fields
(:func:`slm.ingest.with_derived`: terms, entities, dates, session). :func:`rederive` is
the same stage over memories already stored (``reindex``): their stored vectors are kept,
only a text longer than the model's window is embedded again, and neighbours are looked
for among earlier memories only, as they were when each was stored. :class:`AllOrNothing`
makes several writes one for their caller: a conversation or an import too large for one
transaction (its vectors are held in memory until it commits) is written in chunks, and a
chunk that fails takes the ones before it away.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from types import TracebackType

import numpy as np

from slm.embed import Embedder, Matrix, embed_passages, reads_passages
from slm.errors import SlmError, StoreError
from slm.index.vector_cache import Vectors
from slm.ingest import (
    SEMANTIC_LINK_FLOOR,
    SEMANTIC_LINKS,
    nearest_stored,
    semantic_links,
    supersede,
    with_derived,
)
from slm.ingest.changes import probable
from slm.ingest.facts import facts
from slm.ingest.standing import embedded_statements
from slm.models import MemoryRecord, NewMemory, Remembered, content_hash
from slm.store import Store, unfinished
from slm.store.base import MAX_PASSAGES

log = logging.getLogger(__name__)

#: A new memory's semantic neighbours: (stored key, cosine) and (index in its batch, cosine).
Links = tuple[tuple[tuple[int, float], ...], tuple[tuple[int, float], ...]]
#: Its probable changes: (earlier memory, in the batch?, evidence, sure?).
Changes = tuple[tuple[int, bool, str, bool], ...]


def write(
    store: Store,
    index: Vectors,
    profile: str,
    embedder: Embedder,
    checked: Sequence[NewMemory],
    *,
    auto: bool,
) -> list[Remembered]:
    """Store ``checked`` memories (identical content in the same scope is stored once, the
    first of several in one batch is the one created) in one transaction and say what was
    done with each, in order: the memories each replaces as it said, and the probable
    updates found (with ``auto``, they supersede too). A memory this write is told exists
    is one it keeps: claimed from an unfinished write that may take it away, or, when such
    a write took it away first, written again (:mod:`slm.store.unfinished`)."""
    for _ in range(_TRIES):
        done = _write_once(store, index, profile, embedder, checked, auto)
        if done is not None:
            return done
    raise StoreError(
        f"the memories this write found stored were taken away {_TRIES} times while it "
        "ran (a write of several parts failing again and again); nothing was stored"
    )


def _write_once(
    store: Store,
    index: Vectors,
    profile: str,
    embedder: Embedder,
    checked: Sequence[NewMemory],
    auto: bool,
) -> list[Remembered] | None:
    """:func:`write`; None when a memory it found stored was taken away before it could
    claim it (the write is then made again, and stores it)."""
    ours = unfinished.own()
    with store.writing(profile):  # one connection for its reads and its transaction
        known = store.existing(profile, [c.content_hash for c in checked])
        _check_supersedes(store, profile, checked, known)
        pending: dict[str, NewMemory] = {}
        for c in checked:
            if c.content_hash not in known:
                pending.setdefault(c.content_hash, c)
        new_items = prepare(store, index, profile, embedder, list(pending.values()))
        ids = dict(known)
        updates: dict[str, tuple[str, ...]] = {}
        told = set(known.values())
        if new_items:
            stored = store.insert(profile, new_items, supersede_updates=auto)
            ids.update((n.content_hash, s.id) for n, s in zip(new_items, stored, strict=True))
            told |= {s.id for s in stored if not s.created}
            updates = _updates_of(store, profile, [s.key for s in stored if s.created])
        if told and not _kept(store, profile, sorted(told), ours):
            return None
        for c in checked:
            if c.supersedes and c.content_hash in known:
                (present,) = store.get(profile, [known[c.content_hash]])
                store.versions.supersede(profile, present.id, c.supersedes, present.starts)
        records = {r.id: r for r in store.get(profile, list(set(ids.values())))}
        out = []
        for c in checked:
            created = c.content_hash not in known
            known.setdefault(c.content_hash, ids[c.content_hash])
            id_ = ids[c.content_hash]
            said = tuple(c.supersedes)
            found = updates.get(id_, ()) if created else ()
            out.append(
                Remembered(records[id_], created, tuple(i for i in found if i not in said), said)
            )
        return out


def _kept(store: Store, profile: str, told: list[str], ours: set[str]) -> bool:
    """Whether every memory of ``told`` (found stored, to be answered with ``created:
    false``) stays: each is still stored, and those an unfinished write may take away are
    claimed from it, unless that write is this one (``ours``: what its parts created so
    far, which its failure takes away). Read from the rows, not a cache: another process
    may have taken one away a moment ago."""
    standing = store.told(profile, told)
    if len(standing) < len(told):
        return False
    claimable = [id_ for id_, held in standing.items() if held and id_ not in ours]
    return not claimable or len(store.claim(profile, claimable)) == len(claimable)


#: Writes made again because a memory they found stored was taken away meanwhile.
_TRIES = 5


class AllOrNothing:
    """Writes that succeed or fail together: each write's answer goes through :meth:`add`,
    which keeps the ids of the memories it created; if the block fails, those memories are
    taken away (one transaction, which also gives back the validity of memories they
    replaced) before the error goes on, except those another write was told exist
    meanwhile, which are that write's too (:mod:`slm.store.unfinished`). Other readers may
    see the first writes meanwhile, and a process killed half-way keeps them: the write is
    resumable, as storing the same items again stores only what is missing."""

    def __init__(self, store: Store, profile: str) -> None:
        self.store, self.profile = store, profile
        self.created: list[str] = []
        self._parts = unfinished.writing_in_parts()
        self._mine: set[str] = set()

    def add(self, done: list[Remembered]) -> list[Remembered]:
        fresh = [d.id for d in done if d.created]
        self.created.extend(fresh)
        self._mine.update(fresh)
        return done

    def __enter__(self) -> AllOrNothing:
        self._mine = self._parts.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._parts.__exit__(None, None, None)
        if not self.created:
            return
        if exc is None:
            try:
                self.store.finish(self.profile, self.created)
            except SlmError as left:  # the marks stay; a later write told of one claims it
                log.warning("slm: a finished write's marks stay: %s", left)
            return
        try:
            self.store.take_back(self.profile, self.created)
        except SlmError as undo:
            raise StoreError(
                f"{exc}; the {len(self.created)} memories written before it are still stored "
                f"(taking them away failed: {undo}); storing the same again completes it"
            ) from exc


def _check_supersedes(
    store: Store, profile: str, checked: Sequence[NewMemory], known: Mapping[str, str]
) -> None:
    named = list(dict.fromkeys(id_ for c in checked for id_ in c.supersedes))
    if not named:
        return
    targets = {r.id: r for r in store.get(profile, named)}
    hashes = {known[c.content_hash]: c.content_hash for c in checked if c.content_hash in known}
    existing = {hashes[r.id]: r for r in store.get(profile, list(hashes))}
    supersede.check(profile, checked, targets, existing)


def _updates_of(store: Store, profile: str, keys: Sequence[int]) -> dict[str, tuple[str, ...]]:
    """For new memories (by key): the ids of the memories each probably updates."""
    found: dict[str, list[str]] = {}
    wanted = set(keys)
    for update in store.versions.updates(profile, keys):
        if update.newer in wanted and not update.explicit:
            found.setdefault(update.newer_id, []).append(update.older_id)
    return {id_: tuple(dict.fromkeys(olders)) for id_, olders in found.items()}


def prepare(
    store: Store, index: Vectors, profile: str, embedder: Embedder, fresh: Sequence[NewMemory]
) -> list[NewMemory]:
    """``fresh`` (checked, none of them stored yet) ready to store, in order. Links and
    changes are looked for among memories of each one's own scope only (in ``index``, the
    store's vector indexes)."""
    texts = [item.content for item in fresh]
    passages = embed_passages(embedder, texts, MAX_PASSAGES)
    embedded = firsts(passages, embedder.dim)
    standing = embedded_statements(embedder, texts, [item.source for item in fresh])
    stated = [facts(item.content, item.source) for item in fresh]
    links: list[Links] = [((), ())] * len(fresh)
    found: list[Changes] = [()] * len(fresh)
    scopes: dict[str, list[int]] = {}
    for i, item in enumerate(fresh):
        scopes.setdefault(item.scope, []).append(i)
    for scope, rows in scopes.items():
        part = embedded[rows]
        nearest = nearest_stored(store, index, profile, part, scope)
        for i, (stored, batch) in zip(rows, semantic_links(part, nearest), strict=True):
            links[i] = (stored, tuple((rows[j], cos) for j, cos in batch))
        items, said = [fresh[i] for i in rows], [stated[i] for i in rows]
        changes = probable(store, profile, items, part, nearest, said)
        for i, change in zip(rows, changes, strict=True):
            found[i] = tuple(
                (rows[other] if in_batch else other, in_batch, evidence, sure)
                for other, in_batch, evidence, sure in change
            )
    return [
        with_derived(item, p, stored, batch, statements, changes, said)
        for item, p, (stored, batch), statements, changes, said in zip(
            fresh, passages, links, standing, found, stated, strict=True
        )
    ]


def rederive(
    store: Store,
    index: Vectors,
    profile: str,
    embedder: Embedder,
    records: Sequence[MemoryRecord],
) -> list[tuple[int, NewMemory]]:
    """Stored ``records`` derived again (key, memory), from their stored vectors."""
    vectors = index.get(profile, [r.key for r in records])
    scopes = {
        scope: store.scope_members(profile, scope) if store.other_scopes(profile, scope) else None
        for scope in {r.scope for r in records}
    }
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
            for key, score in index.search(
                profile, vector, SEMANTIC_LINKS, scopes[record.scope], below=record.key
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
        content_hash=content_hash(record.content, record.scope),
        scope=record.scope,
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
