"""A profile's memory-to-memory edges, held in this process as arrays: what spreading
activation walks on every recall without reading a row, on both stores.

A recall's spreading activation takes two hops from its seeds and reads the edges of every
memory it passes through (up to 64 a hop). On a store of 100k memories most of those were
never read before, so their rows came from the database one statement at a time. Here a
profile's edges are one table sorted by source (``src``, ``dst``, ``weight``, ``kind``),
with each source's first row (``keys``, ``starts``); a memory's edges are a slice of it.

Kept current from the store's change feed (:mod:`slm.store.feed`), as the vector indexes
are (:mod:`slm.index.vector_cache`): when the store may have changed, the changes after the
arrays' sequence number and the edges they touched are read in one snapshot of the store,
so what is held is exactly the rows as of the last change applied. Memory keys are never
reused, so a change's keys say which memories' edges to read again, whole:

- a write adds edges only together with a new memory, and every edge it adds names one (a
  turn and the one before it, a memory and its similar neighbours): the written memories
  and those with an edge to one of them (``src IN written OR dst IN written``);
- forgetting a memory removes its edges and joins its turns before and after; every memory
  whose edges that changes had an edge to it: the forgotten memory's neighbours as held;
- a change marked ``rederived`` (``slm reindex``, a change of scope keys) may have changed
  any edge: the arrays are read whole again, as they are when more than :data:`_BATCH`
  changes are waiting.

What changed since the arrays were built is held beside them (``overlay``: each changed
memory's edges whole), and merged into new arrays once it covers more than
:data:`OVERLAY_SHARE` of their memories (at least :data:`OVERLAY_MIN`). Profiles of at
least :data:`SAVE_MIN` memories with edges are then saved when the store gives a folder
(SQLite: ``<file>.index/<profile>#edges.json`` and its data file, with the feed position
they reflect; PostgreSQL keeps them in memory only), and opened from there, so opening a
large store reads only the changes since. Saved arrays are used only when they were saved
in this format, for this database (its ``store_id``) and profile, at a feed position the
rows have reached, and their last memory key still holds the memory it held. The first
recall of a large profile with nothing saved reads its edges whole (1.4 s for the 790k
edges of 100k memories on SQLite: 0.8 s of SQL, 0.6 s building the arrays), once. Saved
arrays of more than :data:`IN_MEMORY_ROWS` edges are not read into memory but mapped from
their file: the pages recalls touch are what they cost.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from slm.index import saved
from slm.index.vector_cache import Followed
from slm.store import feed
from slm.store.base import Cursor
from slm.store.files import Untrusted, data_file, read_manifest, save_pair

#: One memory's edge as :meth:`EdgeCache.edges_from` gives it: (neighbour, kind, weight).
Edge = tuple[int, str, float]
Edges = tuple[Edge, ...]

#: One row of the arrays, packed (25 bytes).
ROW = np.dtype([("src", "<i8"), ("dst", "<i8"), ("weight", "<f8"), ("kind", "u1")])
#: Merge what changed into new arrays once it covers this share of their memories...
OVERLAY_SHARE = 0.05
#: ... or this many memories, whichever is more.
OVERLAY_MIN = 512
#: Saved arrays of at most this many edges are read into memory (50 MB; 100k memories of
#: a conversation have 790k); larger ones are mapped from their file and paged in as read.
IN_MEMORY_ROWS = 2_000_000
#: Memories whose edges are kept as tuples once read, per profile (as the read cache's
#: bound, slm.store.readcache.LIMIT).
READ_LIMIT = 20_000
#: Profiles with at least this many memories with edges have their arrays saved.
SAVE_MIN = 5_000
#: More changes than this waiting: the arrays are read whole instead.
_BATCH = 10_000
_SUFFIX = "#edges"
_EDGE = "SELECT src, dst, weight, kind FROM edges WHERE "


@dataclass(frozen=True, slots=True)
class EdgeArrays:
    """A profile's edges: ``table`` (rows of :data:`ROW`, sorted by source, then
    neighbour, then kind, as ``edges_from`` orders a memory's edges); the sources that
    have any (``keys``, ascending) and where each one's rows start (``starts``, one more
    than ``keys``); the names of the kind codes."""

    table: npt.NDArray[Any]
    keys: npt.NDArray[np.int64]
    starts: npt.NDArray[np.int64]
    kinds: tuple[str, ...]

    @classmethod
    def of(cls, table: npt.NDArray[Any], kinds: tuple[str, ...]) -> EdgeArrays:
        """From a sorted table."""
        src = table["src"]
        if not len(src):
            return cls(table, np.zeros(0, np.int64), np.zeros(1, np.int64), kinds)
        first = np.flatnonzero(np.concatenate([[True], src[1:] != src[:-1]]))
        starts = np.append(first, len(src)).astype(np.int64)
        return cls(table, np.asarray(src[first], dtype=np.int64), starts, kinds)

    @classmethod
    def of_rows(cls, rows: Sequence[tuple[int, int, float, str]]) -> EdgeArrays:
        """From (src, dst, weight, kind) rows in the table's order."""
        codes: dict[str, int] = {}
        table = np.zeros(len(rows), dtype=ROW)
        if rows:
            src, dst, weight, kind = zip(*rows, strict=True)
            table["src"], table["dst"], table["weight"] = src, dst, weight
            table["kind"] = [codes.setdefault(name, len(codes)) for name in kind]
        return cls.of(table, tuple(codes))

    def __len__(self) -> int:
        return len(self.keys)

    def edges(self, keys: Iterable[int]) -> dict[int, Edges]:
        """The edges of each of ``keys`` that has any."""
        asked = np.fromiter(keys, dtype=np.int64)
        if not len(self.keys) or not len(asked):
            return {}
        rows = np.minimum(np.searchsorted(self.keys, asked), len(self.keys) - 1)
        held = self.keys[rows] == asked
        asked, rows = asked[held], rows[held]
        # every asked memory's rows in one gather, then cut per memory
        starts, ends = self.starts[rows], self.starts[rows + 1]
        bounds = np.concatenate([[0], np.cumsum(ends - starts)])
        gather = np.arange(bounds[-1]) + np.repeat(starts - bounds[:-1], ends - starts)
        part = self.table[gather]
        kinds = self.kinds
        names = [kinds[code] for code in part["kind"].tolist()]
        edges = list(zip(part["dst"].tolist(), names, part["weight"].tolist(), strict=True))
        cuts = bounds.tolist()
        return {key: tuple(edges[cuts[i] : cuts[i + 1]]) for i, key in enumerate(asked.tolist())}

    def merged(self, overlay: Mapping[int, Edges]) -> EdgeArrays:
        """These arrays with each memory of ``overlay`` holding the edges it gives (none
        for a forgotten memory)."""
        codes = {name: code for code, name in enumerate(self.kinds)}
        rows = [
            (key, dst, weight, codes.setdefault(kind, len(codes)))
            for key in sorted(overlay)
            for dst, kind, weight in overlay[key]
        ]
        added = np.zeros(len(rows), dtype=ROW)
        if rows:
            added["src"], added["dst"], added["weight"], added["kind"] = zip(*rows, strict=True)
        changed = np.fromiter(overlay, dtype=np.int64)
        kept = self.table[~np.isin(self.table["src"], changed)]
        table = np.concatenate([kept, added])
        # each source's rows come whole from one side, already in order: a stable sort by
        # source keeps them so
        table = table[np.argsort(table["src"], kind="stable")]
        return EdgeArrays.of(table, tuple(codes))

    def save(self, folder: Path, name: str, watermark: dict[str, Any]) -> None:
        """Saved as a pair (:func:`slm.store.files.save_pair`): the table, then the keys
        and starts, in one file."""

        def write(path: Path) -> None:
            with path.open("wb") as handle:
                for part in (self.table, self.keys, self.starts):
                    handle.write(np.ascontiguousarray(part).tobytes())

        shape = {"rows": len(self.table), "memories": len(self.keys), "kinds": list(self.kinds)}
        save_pair(folder, name, "edges", write, {**watermark, **shape})

    @classmethod
    def load(cls, folder: Path, name: str, manifest: Mapping[str, Any]) -> EdgeArrays:
        """The arrays a manifest names (the edges read into memory or, above
        :data:`IN_MEMORY_ROWS`, mapped), once the file is checked to be the one saved
        (:func:`slm.store.files.data_file`) and the arrays to be well formed
        (:meth:`check`). Raises :class:`slm.store.files.Untrusted`."""
        path = data_file(folder, name, "edges", dict(manifest))
        rows, memories = _count(manifest, "rows"), _count(manifest, "memories")
        kinds = manifest.get("kinds")
        if (
            not isinstance(kinds, list)
            or len(kinds) > 256
            or not all(isinstance(kind, str) for kind in kinds)
        ):
            raise Untrusted("its kinds are not a list of at most 256 names")
        if path.stat().st_size != rows * ROW.itemsize + (2 * memories + 1) * 8:
            raise Untrusted("its data file's size does not match its rows and memories")
        try:
            table: npt.NDArray[Any] = np.zeros(0, dtype=ROW)
            if 0 < rows <= IN_MEMORY_ROWS:
                table = np.fromfile(path, dtype=ROW, count=rows)
            elif rows:  # paged from the file, not held (a file cannot map zero bytes)
                table = np.memmap(path, dtype=ROW, mode="r", shape=(rows,))
            after = rows * ROW.itemsize
            keys = np.memmap(path, dtype="<i8", mode="r", offset=after, shape=(memories,))
            starts = np.memmap(
                path, dtype="<i8", mode="r", offset=after + memories * 8, shape=(memories + 1,)
            )
        except (OSError, ValueError) as exc:
            raise Untrusted(f"its data file cannot be read: {exc}") from None
        arrays = cls(table, keys.astype(np.int64), starts.astype(np.int64), tuple(kinds))
        arrays.check(_count(manifest, "max_key"))
        return arrays

    def check(self, max_key: int) -> None:
        """Raise :class:`slm.store.files.Untrusted` unless these arrays are as
        :meth:`of` builds them: ``starts`` from 0 to the table's length, each source
        holding at least one row; ``keys`` rising, each a memory key up to ``max_key``;
        each row's source the key it is filed under, its neighbour a memory key, its kind
        code one of ``kinds`` and its weight finite."""
        table, keys, starts = self.table, self.keys, self.starts
        if len(starts) != len(keys) + 1 or starts[0] != 0 or starts[-1] != len(table):
            raise Untrusted("its offsets do not run from 0 to the number of edges")
        counts = np.diff(starts)
        if len(counts) and counts.min() < 1:
            raise Untrusted("its offsets do not rise")
        if len(keys) and (keys[0] < 1 or keys[-1] > max_key or np.any(np.diff(keys) <= 0)):
            raise Untrusted("its memory keys do not rise within the memories saved")
        if not len(table):
            return
        if not np.array_equal(table["src"], np.repeat(keys, counts)):
            raise Untrusted("its edges are not filed under their own memories")
        dst = table["dst"]
        if dst.min() < 1 or dst.max() > max_key:
            raise Untrusted("an edge names a memory key outside the memories saved")
        if int(table["kind"].max()) >= len(self.kinds):
            raise Untrusted("an edge's kind code names no kind")
        if not np.isfinite(table["weight"]).all():
            raise Untrusted("an edge's weight is not a finite number")


def _count(manifest: Mapping[str, Any], key: str) -> int:
    """A manifest's whole number ``key``, at least 0 and at most 2**48 (a count or a key)."""
    value = manifest.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 2**48:
        raise Untrusted(f"its {key} is not a count")
    return value


@dataclass
class EdgeState:
    """One profile's arrays and what changed since they were built."""

    arrays: EdgeArrays
    #: the feed's sequence number of the last change applied (arrays and overlay)
    seq: int = 0
    #: the highest memory key written by the changes applied (the restored-copy check of
    #: saved arrays)
    max_key: int = 0
    #: each memory whose edges changed since the arrays were built: its edges whole
    overlay: dict[int, Edges] = field(default_factory=dict)
    #: what was read of the arrays as tuples, by key (at most READ_LIMIT; a small profile's
    #: recalls ask for the same memories again and again)
    read: dict[int, Edges] = field(default_factory=dict)
    #: the store's version when these arrays last caught up
    version: int = -1

    def rebuilt(self, arrays: EdgeArrays) -> None:
        """Hold ``arrays``, which reflect every change applied."""
        self.arrays, self.overlay, self.read = arrays, {}, {}


class EdgeCache:
    """Per-profile edge arrays of one store, following its change feed. They have a lock
    of their own, and take the store's only to read rows: recalls in other threads go on
    reading the store while one reads edges here."""

    def __init__(self, store: Followed) -> None:
        self._store = store
        self._lock = threading.RLock()
        self.folder = store.folder
        self.states: dict[str, EdgeState] = {}

    def edges_from(self, profile: str, keys: Sequence[int]) -> dict[int, Edges]:
        """Memory-memory edges leaving each of ``keys`` that has any, as (neighbour key,
        kind, weight), as they are in the rows."""
        with self._lock:
            state = self._current(profile)
            overlay, read = state.overlay, state.read
            wanted = sorted(set(keys))  # by key, as the rows are read
            missing = [key for key in wanted if key not in overlay and key not in read]
            if missing:
                if len(read) + len(missing) > READ_LIMIT:
                    read.clear()
                found = state.arrays.edges(missing)
                read.update((key, found.get(key, ())) for key in missing)
            out = ((key, overlay[key] if key in overlay else read[key]) for key in wanted)
            return {key: edges for key, edges in out if edges}

    def info(self) -> dict[str, Any]:
        with self._lock:
            return {
                profile: {
                    "memories": len(state.arrays),
                    "edges": len(state.arrays.table),
                    "changed": len(state.overlay),
                }
                for profile, state in self.states.items()
            }

    # -- kept current -----------------------------------------------------------------

    def _current(self, profile: str) -> EdgeState:
        version = self._store.version(profile)  # before reading: a commit after is seen next
        state = self.states.get(profile)
        if state is None:
            state = self.states[profile] = self._open(profile)
        elif version == state.version:
            return state
        state.version = -1  # tried again on the next read should this fail
        rebuilt = self._store.snapshot(lambda cur: self._catch_up(cur, profile, state))
        state.version = version
        if rebuilt:
            self._saved_if_large(profile, state)
        return state

    def _open(self, profile: str) -> EdgeState:
        """From the saved arrays when they describe this database and pass their check
        (one warning when they do not); otherwise read whole from the rows."""
        if self.folder is not None:
            name = profile + _SUFFIX
            manifest = read_manifest(self.folder / f"{name}.json")
            if manifest is not None and self._belongs(profile, manifest):
                try:
                    arrays = EdgeArrays.load(self.folder, name, manifest)
                    return EdgeState(arrays, int(manifest["seq"]), int(manifest["max_key"]))
                except Untrusted as exc:
                    saved.untrusted("edge arrays", profile, exc)
        state = self._store.snapshot(lambda cur: self._read_whole(cur, profile))
        self._saved_if_large(profile, state)
        return state

    def _belongs(self, profile: str, manifest: Mapping[str, Any]) -> bool:
        """Whether saved arrays describe this database's profile where it still stands
        (:func:`slm.index.saved.belongs`)."""
        store = self._store
        return saved.belongs(store.select, store.mark, store.store_id, profile, manifest)

    def _read_whole(self, cur: Cursor, profile: str) -> EdgeState:
        """The profile's edges as the feed's head leaves them (``cur`` reads one snapshot)."""
        mark = self._store.mark
        seq = feed.head(_selector(cur), mark, profile)
        (top,) = cur.execute(
            f"SELECT coalesce(max(key), 0) FROM memories WHERE profile = {mark}", (profile,)
        ).fetchone()
        rows = cur.execute(
            f"{_EDGE}profile = {mark} ORDER BY src, dst, kind", (profile,)
        ).fetchall()
        return EdgeState(EdgeArrays.of_rows(rows), seq, int(top))

    def _catch_up(self, cur: Cursor, profile: str, state: EdgeState) -> bool:
        """Bring ``state`` to the rows of ``cur``'s snapshot (see the module docstring),
        merging what changed into new arrays when it has grown large; whether the arrays
        were built again (and may be saved). Every row is read before ``state`` changes."""
        changes = feed.since(_selector(cur), self._store.mark, profile, state.seq, _BATCH + 1)
        if not changes:
            return False
        if len(changes) > _BATCH or any(change.rederived for change in changes):
            fresh = self._read_whole(cur, profile)
            state.rebuilt(fresh.arrays)
            state.seq, state.max_key = fresh.seq, fresh.max_key
            return True
        written = {key for change in changes for key in change.written}
        forgotten = {key for change in changes for key in change.forgotten}
        # A memory written and forgotten since is not held: its turn before was joined to
        # its turn after, which was written after it, so is in ``written`` too.
        touched = {dst for key in forgotten for dst, _, _ in self._edges_of(state, key)}
        d = self._store.dialect
        linked = {src for (src,) in d.rows_in(cur, "SELECT src FROM edges WHERE dst", [], written)}
        again = sorted((written | linked | touched) - forgotten)
        found: dict[int, list[Edge]] = {key: [] for key in again}
        for src, dst, weight, kind in d.rows_in(cur, f"{_EDGE}src", [], again):
            found[src].append((dst, kind, weight))
        state.overlay.update((key, tuple(sorted(edges))) for key, edges in found.items())
        state.overlay.update((key, ()) for key in forgotten)
        state.seq, state.max_key = changes[-1].seq, max([state.max_key, *written])
        if len(state.overlay) <= max(OVERLAY_MIN, OVERLAY_SHARE * len(state.arrays)):
            return False
        state.rebuilt(state.arrays.merged(state.overlay))
        return True

    def _edges_of(self, state: EdgeState, key: int) -> Edges:
        if key in state.overlay:
            return state.overlay[key]
        return state.arrays.edges([key]).get(key, ())

    def _saved_if_large(self, profile: str, state: EdgeState) -> None:
        """Save the arrays (called when they hold every change applied, the overlay
        empty) when the store gives a folder and they are large; arrays too large to hold
        are then mapped from the file (smaller ones are held as they are, equal to it)."""
        if self.folder is None or len(state.arrays) < SAVE_MIN:
            return
        store = self._store
        mark = saved.watermark(
            store.select, store.mark, store.store_id, profile, state.seq, state.max_key
        )
        try:
            state.arrays.save(self.folder, profile + _SUFFIX, mark)
        except OSError:
            return  # arrays that cannot be saved are read from the rows next time
        if len(state.arrays.table) <= IN_MEMORY_ROWS:
            return
        name = profile + _SUFFIX
        manifest = read_manifest(self.folder / f"{name}.json")
        with contextlib.suppress(Untrusted):  # else held as it is, equal to the file
            if manifest is not None:
                state.arrays = EdgeArrays.load(self.folder, name, manifest)


def _selector(cur: Cursor) -> Callable[[str, Sequence[Any]], list[Any]]:
    """``cur``'s statements as the feed reads them."""
    return lambda sql, params: list(cur.execute(sql, params).fetchall())
