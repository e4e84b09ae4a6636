"""The SQLite store's memory-to-memory edges, held per profile as arrays and saved beside
the database: what spreading activation walks on every recall without reading a row.

A recall's spreading activation takes two hops from its seeds and reads the edges of every
memory it passes through (up to 64 a hop). On a store of 100k memories most of those were
never read before, so their rows came from SQLite one statement at a time. Here a profile's
edges are one table sorted by source (``src``, ``dst``, ``weight``, ``kind``), with each
source's first row (``keys``, ``starts``); a memory's edges are a slice of it.

Kept in step with the rows, as the vector indexes are (:mod:`slm.index.vector_cache`):

- Edges are only ever added together with a new memory, and every edge added names one
  (a turn and the one before it, a memory and its similar neighbours). Keys only grow, so
  the edges written since the memory ``seen`` are those ``src > seen OR dst > seen``.
- Forgetting a memory removes its edges and joins its turns before and after; every memory
  whose edges that changes had an edge to it, so those are read again (the keys forgotten
  in the change feed, slm.store.feed).
- ``slm reindex`` writes every edge again: it changes the store's ``edges epoch`` (in
  ``meta``, in the same transaction), and the arrays are read whole again.

What changed since the arrays were built is held beside them (``overlay``: each changed
memory's edges whole), and merged into new arrays once it covers more than
:data:`OVERLAY_SHARE` of their memories (at least :data:`OVERLAY_MIN`). Profiles of at
least :data:`SAVE_MIN` memories are then saved beside the database
(``<file>.index/<profile>#edges.json`` and its data file, with the watermark: the last key
and the feed's sequence number they reflect) and opened from there, so opening a large
store reads only the edges written since from SQLite. The first recall of a large
profile with no saved arrays reads its edges whole (1.4 s for the 790k edges of 100k
memories: 0.8 s of SQL, 0.6 s building the arrays), once. Saved arrays of more than
:data:`IN_MEMORY_ROWS` edges are not read into memory but mapped from their file: the
pages recalls touch are what they cost.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from slm.store.derived import EDGES_EPOCH
from slm.store.files import data_files, read_manifest, save_pair
from slm.store.sqlite_conn import Connection
from slm.store.sqlite_dialect import SQLiteDialect

#: One memory's edge as ``edges_from`` gives it: (neighbour, kind, weight).
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
_SUFFIX = "#edges"
_DIALECT = SQLiteDialect()


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
    def load(cls, folder: Path, manifest: Mapping[str, Any]) -> EdgeArrays | None:
        """The arrays a manifest names (the edges read into memory or, above
        :data:`IN_MEMORY_ROWS`, mapped); None when they do not read back whole."""
        try:
            path = folder / str(manifest["file"])
            rows, memories = int(manifest["rows"]), int(manifest["memories"])
            kinds = tuple(str(name) for name in manifest["kinds"])
            if path.stat().st_size != rows * ROW.itemsize + (2 * memories + 1) * 8:
                return None
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
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if len(starts) and (starts[0] != 0 or starts[-1] != rows):
            return None
        return cls(table, keys.astype(np.int64), starts.astype(np.int64), kinds)


@dataclass
class EdgeState:
    """One profile's arrays and what changed since they were built."""

    arrays: EdgeArrays
    #: the highest memory key whose edges are caught up (arrays and overlay)
    seen: int = 0
    #: the change feed's sequence number caught up
    forgotten_seq: int = 0
    #: the store's edges epoch when caught up
    epoch: str = ""
    #: the highest memory key the arrays alone reflect (their watermark when saved)
    built: int = 0
    built_seq: int = 0
    #: each memory whose edges changed since the arrays were built: its edges whole
    overlay: dict[int, Edges] = field(default_factory=dict)
    #: what was read of the arrays as tuples, by key (at most READ_LIMIT; a small profile's
    #: recalls ask for the same memories again and again)
    read: dict[int, Edges] = field(default_factory=dict)
    dirty: bool = False
    data_version: int = -1

    def rebuilt(self, arrays: EdgeArrays, top: int, seq: int) -> None:
        """Hold ``arrays``, which reflect every edge up to ``top`` and ``seq``."""
        self.arrays, self.overlay, self.read = arrays, {}, {}
        self.built, self.built_seq = top, seq


class EdgeCache:
    """Per-profile edge arrays of one SQLite store, following its rows. They have a lock of
    their own, and take the store's only to read rows: recalls in other threads go on
    reading the store while one reads edges here."""

    def __init__(
        self, conn: Connection, folder: Path, store_id: str, version: Callable[[str], int]
    ) -> None:
        self._conn = conn
        self._lock = threading.RLock()
        self._version = version
        self.folder = folder
        self.store_id = store_id
        self.states: dict[str, EdgeState] = {}

    def edges(self, profile: str, keys: Sequence[int]) -> dict[int, Edges]:
        """The edges of each of ``keys`` that has any, as they are in the rows."""
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

    def written(self) -> None:
        """Our own connection committed: every profile's arrays must look for changes."""
        with self._lock:
            for state in self.states.values():
                state.dirty = True

    def drop(self, profile: str) -> None:
        """Forget the profile's arrays, in memory and on disk (``slm reindex``)."""
        with self._lock:
            self.states.pop(profile, None)
            name = profile + _SUFFIX
            for path in [self.folder / f"{name}.json", *data_files(self.folder, name, "edges")]:
                path.unlink(missing_ok=True)

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

    # -- kept in step -----------------------------------------------------------------

    def _current(self, profile: str) -> EdgeState:
        state = self.states.get(profile)
        if state is None:
            return self.states.setdefault(profile, self._open(profile))
        version = self._version(profile)
        if state.dirty or version != state.data_version:
            state.data_version, state.dirty = version, False
            self._conn.snapshot(lambda db: self._catch_up(db, profile, state))
        return state

    def _open(self, profile: str) -> EdgeState:
        """From the saved arrays when they describe this database, caught up; otherwise
        read whole from the rows."""
        version = self._version(profile)
        manifest = read_manifest(self.folder / f"{profile}{_SUFFIX}.json")
        arrays = None
        if manifest is not None and self._conn.snapshot(
            lambda db: self._belongs(db, profile, manifest)
        ):
            arrays = EdgeArrays.load(self.folder, manifest)
        if arrays is None or manifest is None:
            state = self._conn.snapshot(lambda db: self._read_whole(db, profile))
            state.data_version = version
            if len(state.arrays) >= SAVE_MIN:
                self._save(profile, state)
            return state
        top, seq = int(manifest["top"]), int(manifest["feed_seq"])
        state = EdgeState(arrays, top, seq, str(manifest["epoch"]), top, seq)
        state.data_version = version
        self._conn.snapshot(lambda db: self._catch_up(db, profile, state))
        return state

    def _belongs(self, db: sqlite3.Connection, profile: str, manifest: Mapping[str, Any]) -> bool:
        """Whether saved arrays describe this database's profile at a point it has passed
        (as :meth:`VectorCache._belongs <slm.index.vector_cache.VectorCache>` checks)."""
        try:
            top, seq = int(manifest["top"]), int(manifest["feed_seq"])
            same = (manifest["store_id"], manifest["profile"], manifest["epoch"])
        except (KeyError, TypeError, ValueError):
            return False
        now_top, now_seq, epoch = _watermark(db, profile)
        if same != (self.store_id, profile, epoch) or top > now_top or seq > now_seq:
            return False
        row = db.execute("SELECT id FROM memories WHERE key = ?", (top,)).fetchone()
        return row is None or row[0] == manifest.get("last_id", row[0])

    def _read_whole(self, db: sqlite3.Connection, profile: str) -> EdgeState:
        top, seq, epoch = _watermark(db, profile)
        rows = db.execute(
            "SELECT src, dst, weight, kind FROM edges WHERE profile = ? ORDER BY src, dst, kind",
            (profile,),
        ).fetchall()
        return EdgeState(EdgeArrays.of_rows(rows), top, seq, epoch, top, seq)

    def _catch_up(self, db: sqlite3.Connection, profile: str, state: EdgeState) -> None:
        """Bring ``state`` to the rows of this read transaction (see the module docstring);
        merge and save the arrays when what changed has grown large."""
        top, seq, epoch = _watermark(db, profile)
        if epoch != state.epoch:
            state.rebuilt(self._read_whole(db, profile).arrays, top, seq)
            state.seen, state.forgotten_seq, state.epoch = top, seq, epoch
            self._saved_if_large(profile, state)
            return
        changed: dict[int, dict[tuple[int, str], float]] = defaultdict(dict)
        for src, dst, weight, kind in db.execute(
            "SELECT src, dst, weight, kind FROM edges WHERE profile = ? AND (src > ? OR dst > ?)",
            (profile, state.seen, state.seen),
        ):
            changed[src][(dst, kind)] = weight
        gone = [
            int(key)
            for (keys,) in db.execute(
                "SELECT forgotten FROM changes WHERE profile = ? AND seq > ? AND forgotten <> ''",
                (profile, state.forgotten_seq),
            )
            for key in keys.split()
        ]
        touched = {dst for key in gone for dst, _, _ in self._edges_of(state, key)} - set(gone)
        for key in touched:
            changed[key] = {}  # read whole below
        head = "SELECT src, dst, weight, kind FROM edges WHERE +profile = ? AND src"
        for src, dst, weight, kind in _DIALECT.rows_in(db, head, [profile], sorted(touched)):
            changed[src][(dst, kind)] = weight
        for key, edges in changed.items():
            if key <= state.seen and key not in touched:  # an earlier memory gained edges
                edges = {**{(d, k): w for d, k, w in self._edges_of(state, key)}, **edges}
            state.overlay[key] = tuple(sorted((d, k, w) for (d, k), w in edges.items()))
        state.overlay.update((key, ()) for key in gone)
        state.seen, state.forgotten_seq = top, seq
        if len(state.overlay) > max(OVERLAY_MIN, OVERLAY_SHARE * len(state.arrays)):
            state.rebuilt(state.arrays.merged(state.overlay), top, seq)
            self._saved_if_large(profile, state)

    def _edges_of(self, state: EdgeState, key: int) -> Edges:
        if key in state.overlay:
            return state.overlay[key]
        return state.arrays.edges([key]).get(key, ())

    def _saved_if_large(self, profile: str, state: EdgeState) -> None:
        if len(state.arrays) >= SAVE_MIN:
            self._save(profile, state)

    def _save(self, profile: str, state: EdgeState) -> None:
        """Save the arrays (what they alone reflect: ``built``); arrays too large to hold
        are then mapped from the file (smaller ones are held as they are, equal to it)."""
        rows = self._conn.rows("SELECT id FROM memories WHERE key = ?", (state.built,))
        watermark = {
            "store_id": self.store_id,
            "profile": profile,
            "epoch": state.epoch,
            "top": state.built,
            "feed_seq": state.built_seq,
            "last_id": rows[0][0] if rows else None,
        }
        try:
            state.arrays.save(self.folder, profile + _SUFFIX, watermark)
        except OSError:
            return  # arrays that cannot be saved are read from the rows next time
        if len(state.arrays.table) <= IN_MEMORY_ROWS:
            return
        manifest = read_manifest(self.folder / f"{profile}{_SUFFIX}.json")
        mapped = EdgeArrays.load(self.folder, manifest) if manifest is not None else None
        if mapped is not None:
            state.arrays = mapped


def _watermark(db: sqlite3.Connection, profile: str) -> tuple[int, int, str]:
    """The highest memory key handed out, the profile's last change in the feed and the
    edges epoch, as this read transaction sees them."""
    top, seq = db.execute(
        "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'memories'), 0), "
        "coalesce((SELECT max(seq) FROM changes WHERE profile = ?), 0)",
        (profile,),
    ).fetchone()
    row = db.execute("SELECT value FROM meta WHERE key = ?", (EDGES_EPOCH,)).fetchone()
    return int(top), int(seq), str(row[0]) if row else ""
