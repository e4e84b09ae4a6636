"""A store's vector indexes, held in this process: one per profile and :class:`Source`
(the memories' own vectors in ``embeddings``; their further passages and their standing
statements in ``passages``), each following the store's change feed (:mod:`slm.store.feed`).

The same code serves both stores. An index is built from the rows the first time a profile
is searched (the feed's head read first, so a change committed while the rows are read is
applied again, harmlessly: adding a key held and removing a key gone do nothing) and then
kept current from the feed: before a search, when the store may have changed (SQLite: its
``data_version`` or a write of this process; PostgreSQL: the profile's feed head, read once
per recall), the changes after the index's sequence number are applied. Memory keys are
never reused, so a change's keys say everything: the vectors of written keys are read,
forgotten ones removed, and a change that wrote passages again rebuilds the passage
indexes. Several processes on one SQLite file, or several servers on one PostgreSQL, each
keep their own indexes this way, and a write any of them acknowledged is searched by the
next recall of every other.

A large profile's graph index is saved beside an SQLite file (``<file>.index/<profile>.json``
+ a data file) with the sequence number it reflects, so opening a store applies only the
changes after it. A crash at any point leaves either the previous saved pair or none, never
a torn one; an index saved for another database (another ``store_id``), another dimension,
or a feed position the rows have not reached (a database restored from an older copy) is
ignored and rebuilt.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from slm.index import saved
from slm.index.vectors import EXACT_MAX, ExactIndex, GraphIndex, Matrix, VectorIndex, graph_from
from slm.store.base import PASSAGE_SPAN, Cursor, Vector
from slm.store.dialect import Reads
from slm.store.feed import Change
from slm.store.files import Untrusted, data_files

#: Changes read per statement while catching up, and keys per statement of vectors read.
_BATCH = 10_000
#: Rows read per statement while building (bounds memory at open).
_ROWS = 50_000
#: A graph index is saved once this many changes (or a quarter of its size) are unsaved.
SAVE_EVERY = 20_000

T = TypeVar("T")


class Followed(Reads, Protocol):
    """What the indexes read of the store they follow
    (:class:`slm.store.relational.Relational`): its rows, its change feed, and a number
    that changes whenever a profile may have changed (:meth:`version`)."""

    @property
    def dim(self) -> int: ...

    @property
    def folder(self) -> Path | None:
        """Where what is derived from the store may be saved (None: nowhere)."""
        ...

    @property
    def store_id(self) -> str: ...

    def snapshot(self, work: Callable[[Cursor], T]) -> T:
        """``work`` with a cursor whose statements all see one commit."""
        ...

    def read_vectors(self, sql: str, params: Sequence[Any]) -> tuple[list[int], Matrix]:
        """The (key, vector) rows of ``sql``: their keys and their vectors as a matrix."""
        ...

    def feed_head(self, profile: str) -> int: ...

    def changes_since(self, profile: str, seq: int, limit: int = ...) -> list[Change]: ...

    def version(self, profile: str) -> int:
        """A number that changes whenever ``profile`` may have changed, this process's
        writes included (read once per recall inside ``Store.reading``)."""
        ...


@dataclass(frozen=True, slots=True)
class Source:
    """The rows an index follows: those of ``table`` meeting ``condition``, keyed by
    ``key``. One memory owns ``span`` consecutive keys (its key times ``span`` onwards),
    so a forgotten memory's keys are known without reading them."""

    table: str
    condition: str = ""
    span: int = 1
    #: appended to the profile to name the saved index (``#`` is never in a profile)
    suffix: str = ""


MEMORY_VECTORS = Source("embeddings")
PASSAGES = Source("passages", "AND kind = 'passage'", PASSAGE_SPAN, "#passages")
STANDING = Source("passages", "AND kind <> 'passage'", PASSAGE_SPAN, "#standing")


@dataclass
class IndexState:
    index: VectorIndex
    #: the feed's sequence number of the last change applied
    seq: int = 0
    #: the highest memory key applied (the restored-copy check of a saved index)
    max_key: int = 0
    unsaved: int = 0
    #: the store's version when this index last caught up (``version``)
    version: int = -1
    #: memory key -> its keys in the index, ascending (built on demand, reset on change)
    owned: dict[int, list[int]] | None = None
    #: what the rows say beside the vector, by key, as read (standing statements' words)
    texts: dict[int, tuple[str, str]] = field(default_factory=dict)


class VectorCache:
    """Per-profile vector indexes over one :class:`Source` of a store (callers hold the
    lock of :class:`Vectors`)."""

    def __init__(self, store: Followed, source: Source) -> None:
        self._store = store
        self.folder = store.folder
        self.dim = store.dim
        self.source = source
        self.states: dict[str, IndexState] = {}

    def index(self, profile: str) -> VectorIndex:
        """The profile's index, brought up to date with the rows."""
        version = self._store.version(profile)  # PostgreSQL: a round trip outside a recall
        state = self.states.get(profile)
        if state is None:
            state = self.states[profile] = self._open(profile)
        elif version == state.version:
            return state.index
        state.version = -1  # caught up again on the next look should this fail
        self._catch_up(profile, state)
        state.version = version
        return state.index

    def owned(self, profile: str, memories: Sequence[int]) -> dict[int, Vector]:
        """The vectors each of ``memories`` owns in the profile's index (for a source of
        several keys per memory), in key order; memories owning none are left out."""
        index = self.index(profile)
        grouped = self._grouped(profile)
        found = [(memory, keys) for memory in memories if (keys := grouped.get(memory))]
        vectors = index.get([key for _, keys in found for key in keys]) if found else None
        if vectors is None:
            return {}
        bounds = np.cumsum([0, *(len(keys) for _, keys in found)])
        return {memory: vectors[bounds[i] : bounds[i + 1]] for i, (memory, _) in enumerate(found)}

    def keys_of(self, profile: str, memories: Collection[int]) -> set[int]:
        """The keys ``memories`` own in the profile's index: what a search limited to those
        memories searches. Read from the smaller side: a scope of many memories, few of
        which own keys here (long texts, standing statements), costs what those few do."""
        self.index(profile)
        grouped = self._grouped(profile)
        if len(grouped) < len(memories):
            wanted = memories if isinstance(memories, set | frozenset) else set(memories)
            return {key for memory, keys in grouped.items() if memory in wanted for key in keys}
        return {key for memory in memories for key in grouped.get(memory, ())}

    def _grouped(self, profile: str) -> dict[int, list[int]]:
        """Memory key -> its keys in the (caught up) index, ascending; built on demand."""
        state = self.states[profile]
        if state.owned is None:
            grouped: dict[int, list[int]] = {}
            for key in sorted(state.index.keys()):
                grouped.setdefault(key // self.source.span, []).append(key)
            state.owned = grouped
        return state.owned

    def loaded(self, profile: str) -> VectorIndex | None:
        state = self.states.get(profile)
        return state.index if state is not None else None

    def _name(self, profile: str) -> str:
        return profile + self.source.suffix

    def _open(self, profile: str) -> IndexState:
        """The saved index when there is one to trust, else one built from the rows."""
        if self.folder is not None:
            try:
                found = GraphIndex.load(
                    self.folder,
                    self._name(profile),
                    lambda m: self._belongs(profile, m),
                    self.source.span,
                )
            except Untrusted as exc:
                found = None
                saved.untrusted(f"vector index ({self.source.table})", profile, exc)
            if found is not None:
                graph, manifest = found
                return IndexState(graph, int(manifest["seq"]), int(manifest["max_key"]))
        return self._build(profile)

    def _build(self, profile: str) -> IndexState:
        """Every row of the profile, at least as they stood at the feed's head (read first)."""
        state = IndexState(ExactIndex(self.dim), seq=self._store.feed_head(profile))
        source, after = self.source, -1
        while True:
            keys, matrix = self._store.read_vectors(
                f"SELECT key, vector FROM {source.table} WHERE profile = {self._store.mark} "
                f"{source.condition} AND key > {self._store.mark} ORDER BY key LIMIT {_ROWS}",
                (profile, after),
            )
            if not keys:
                return state
            self._add(state, keys, matrix)
            after = keys[-1]

    def _add(self, state: IndexState, keys: list[int], matrix: Matrix) -> None:
        state.index.add(keys, matrix)
        state.owned = None
        state.max_key = max(state.max_key, keys[-1] // self.source.span)
        state.unsaved += len(keys)
        if isinstance(state.index, ExactIndex) and len(state.index) > EXACT_MAX:
            state.index = graph_from(state.index)

    def _belongs(self, profile: str, manifest: dict[str, Any]) -> bool:
        """Whether a saved manifest is of vectors of this dimension and describes this
        database's profile where it still stands (:func:`slm.index.saved.belongs`)."""
        try:
            dim = int(manifest["dim"])
        except (KeyError, TypeError, ValueError):
            return False
        store = self._store
        return dim == self.dim and saved.belongs(
            store.select, store.mark, store.store_id, profile, manifest
        )

    def _catch_up(self, profile: str, state: IndexState) -> None:
        """Apply the feed's changes after the index's sequence number."""
        while True:
            changes = self._store.changes_since(profile, state.seq, _BATCH)
            if not changes:
                break
            if any(change.rederived for change in changes) and self.source.span > 1:
                # the passages were written again: read them whole
                fresh = self._build(profile)
                state.index, state.seq, state.max_key = fresh.index, fresh.seq, fresh.max_key
                state.owned, state.unsaved = None, state.unsaved + fresh.unsaved
                state.texts = {}
                continue
            written = sorted({key for change in changes for key in change.written})
            forgotten = {key for change in changes for key in change.forgotten}
            self._read_written(profile, state, [k for k in written if k not in forgotten])
            if forgotten:
                span = self.source.span
                state.index.remove(key * span + i for key in forgotten for i in range(span))
                state.owned = None
                state.unsaved += len(forgotten)
            state.seq = changes[-1].seq
        if isinstance(state.index, GraphIndex) and state.unsaved >= max(
            SAVE_EVERY, len(state.index) // 4
        ):
            self.save(profile, state)

    def _read_written(self, profile: str, state: IndexState, memories: list[int]) -> None:
        """Add the rows of the written memories (a key range, then only those)."""
        span, mark = self.source.span, self._store.mark
        for start in range(0, len(memories), _BATCH):
            part = memories[start : start + _BATCH]
            keys, matrix = self._store.read_vectors(
                f"SELECT key, vector FROM {self.source.table} WHERE profile = {mark} "
                f"{self.source.condition} AND key >= {mark} AND key < {mark} ORDER BY key",
                (profile, part[0] * span, (part[-1] + 1) * span),
            )
            wanted = set(part)
            rows = [i for i, key in enumerate(keys) if key // span in wanted]
            if rows:
                self._add(state, [keys[i] for i in rows], matrix[rows])

    def save(self, profile: str, state: IndexState) -> None:
        if not isinstance(state.index, GraphIndex) or self.folder is None:
            return
        store = self._store
        mark = saved.watermark(
            store.select, store.mark, store.store_id, profile, state.seq, state.max_key
        )
        try:
            state.index.save(self.folder, self._name(profile), mark)
            state.unsaved = 0
        except (OSError, RuntimeError):
            # A cache that cannot be saved is rebuilt from the rows next time.
            pass

    def save_all(self) -> None:
        """Save every loaded graph with changes, after applying the changes committed since
        it last caught up: the last batch written before closing would otherwise be left
        for the next open, whose first add then makes faiss copy the whole vector buffer."""
        for profile, state in list(self.states.items()):
            self.index(profile)  # caught up, when anything changed
            if state.unsaved:
                self.save(profile, state)

    def drop(self, profile: str) -> None:
        """Forget the profile's index, in memory and on disk: the next search builds it
        again from the rows."""
        self.states.pop(profile, None)
        if self.folder is None:
            return
        name = self._name(profile)
        for path in [self.folder / f"{name}.json", *data_files(self.folder, name, "faiss")]:
            path.unlink(missing_ok=True)

    def rebuild(self, profile: str) -> int:
        """Drop the profile's index (in memory and on disk) and build it again from the rows."""
        self.drop(profile)
        index = self.index(profile)
        state = self.states[profile]
        if state.unsaved:  # catching up may have saved it already
            self.save(profile, state)
        return len(index)

    def info(self) -> dict[str, Any]:
        return {
            profile: {
                "kind": state.index.kind,
                "vectors": len(state.index),
                "unsaved_changes": state.unsaved,
            }
            for profile, state in self.states.items()
        }


class Vectors:
    """A store's vector indexes: each memory's vector, its further passages and its
    standing statements' scopes, and the searches over them, each a :class:`VectorCache`
    per profile following the store's change feed: what a write stores or removes is
    searched, or no longer, once the write returns. Large indexes are saved in the store's
    ``folder`` (None: kept in memory only)."""

    def __init__(self, store: Followed) -> None:
        self._store = store
        self._lock = threading.RLock()
        self.dim = store.dim
        caches = [VectorCache(store, source) for source in (MEMORY_VECTORS, PASSAGES, STANDING)]
        self._own, self._passages, self._standing = caches
        self._caches = tuple(caches)

    def search(
        self,
        profile: str,
        query: Vector,
        k: int,
        allowed: set[int] | None,
        below: int | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``k`` (key, cosine) by cosine similarity, best first, ties by key; only keys in
        ``allowed`` and below ``below`` when given."""
        with self._lock:
            return self._own.index(profile).search(query, k, allowed, below)

    def search_many(self, profile: str, queries: Vector, k: int) -> list[list[tuple[int, float]]]:
        """:meth:`search` for each row of ``queries`` (no filters), batched where the index
        can."""
        with self._lock:
            return self._own.index(profile).search_many(queries, k)

    def mean(self, profile: str) -> tuple[Vector, int]:
        """Mean of the profile's stored vectors, and how many there are: ``query . mean`` is
        the query's average cosine similarity to the profile, its background level."""
        with self._lock:
            index = self._own.index(profile)
            return index.mean(), len(index)

    def get(self, profile: str, keys: Sequence[int]) -> Vector:
        """Stored unit vectors for ``keys`` (rows in the same order; zeros for unknown keys):
        from the profile's index when it is loaded and holds them all, else the rows."""
        with self._lock:
            loaded = self._own.loaded(profile)
            cached = loaded.get(list(keys)) if loaded is not None else None
        if cached is not None:
            return cached
        out = np.zeros((len(keys), self.dim), dtype=np.float32)
        row_of = {key: row for row, key in enumerate(keys)}
        mark, dialect = self._store.mark, self._store.dialect
        for part in dialect.slices(keys):
            among, values = dialect.among("key", part)
            found, matrix = self._store.read_vectors(
                f"SELECT key, vector FROM embeddings WHERE profile = {mark} AND {among}",
                [profile, *values],
            )
            for key, vector in zip(found, matrix, strict=True):
                out[row_of[key]] = vector
        return out

    def passage_search(
        self, profile: str, query: Vector, k: int, allowed: set[int] | None
    ) -> list[tuple[int, float]]:
        """The memories owning the ``k`` passages (beyond each memory's first) most similar
        to ``query``, as (key, best cosine among those passages), best first, ties by key;
        only passages of memories in ``allowed`` when given (searched among them, not
        filtered afterwards: a user's own passages are found however many others hold)."""
        with self._lock:
            index = self._passages.index(profile)
            within = None if allowed is None else self._passages.keys_of(profile, allowed)
            hits = index.search(query, k, within) if within is None or within else []
        return best_per_memory(hits, allowed)

    def passages(
        self, profile: str, keys: Sequence[int], standing: bool = False
    ) -> dict[int, Vector]:
        """The further passages of each of ``keys`` that has any, in passage order; with
        ``standing``, the vectors of its standing statements' scopes instead."""
        with self._lock:
            return (self._standing if standing else self._passages).owned(profile, keys)

    def standing_search(
        self, profile: str, query: Vector, k: int, allowed: Collection[int] | None = None
    ) -> list[tuple[int, str, str, float]]:
        """The ``k`` standing statements (instructions, preferences) most similar to
        ``query``, as (memory key, kind, statement, cosine), best first, ties by key; only
        those of memories in ``allowed`` when given (searched among them)."""
        with self._lock:  # the statements' words kept beside their vectors, read once
            index = self._standing.index(profile)
            within = None if allowed is None else self._standing.keys_of(profile, allowed)
            hits = index.search(query, k, within) if within is None or within else []
            found = self._standing.states[profile].texts
            missing = [key for key, _ in hits if key not in found]
            if missing:
                head = (
                    "SELECT key, kind, coalesce(text, '') FROM passages WHERE "
                    f"{self._store.dialect.by_key}profile = {self._store.mark} AND key"
                )
                rows = self._store.select_in(head, profile, missing)
                found.update((key, (kind, text)) for key, kind, text in rows)
            return [
                (key // PASSAGE_SPAN, *found[key], cosine) for key, cosine in hits if key in found
            ]

    def rebuild(self, profile: str) -> int:
        """Rebuild the profile's indexes from the rows (``slm reindex``); the size of the
        memory vectors' one."""
        with self._lock:
            self._passages.rebuild(profile)
            self._standing.rebuild(profile)
            return self._own.rebuild(profile)

    def info(self) -> dict[str, Any]:
        with self._lock:
            info = self._own.info()
            for name, cache in (("passages", self._passages), ("standing", self._standing)):
                for profile, state in cache.info().items():
                    info.setdefault(profile, {})[name] = state
            return info

    def save_all(self) -> None:
        with self._lock:
            for cache in self._caches:
                cache.save_all()


def best_per_memory(
    hits: Iterable[tuple[int, float]], allowed: set[int] | None
) -> list[tuple[int, float]]:
    """Passage hits (passage key, cosine), best first, as (memory key, its best cosine) for
    the memories ``allowed`` admits (all when None): a filtered recall searches passages
    unfiltered and keeps those of admitted memories."""
    best: dict[int, float] = {}
    for key, cosine in hits:
        memory = key // PASSAGE_SPAN
        if allowed is None or memory in allowed:
            best.setdefault(memory, cosine)
    return sorted(best.items(), key=lambda p: (-p[1], p[0]))
