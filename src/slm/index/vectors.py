"""In-process vector indexes over unit vectors, one per profile.

Vectors live in the store's rows (little-endian float32 blobs); an index is a cache of
them, kept in step with the rows by the owning store. Two kinds:

- :class:`ExactIndex`: one matrix, searched by a matrix-vector product. Exact, and the
  fastest choice for small profiles (under :data:`EXACT_MAX` vectors, about a millisecond).
- :class:`GraphIndex`: a navigable small-world graph (HNSW, from ``faiss``) for large
  profiles: a search visits a few thousand vectors whatever the size, an insert costs about
  the same as a search. It keeps its vectors in half precision (cosines within about 1e-4
  of float32's): half the memory and file size, and on 100k stored memories a search took
  0.51 ms against 0.73 with float32 vectors, with the same recall (docs/scale.md). HNSW
  cannot delete, so forgotten keys become tombstones that searches skip; the graph is
  rebuilt when they exceed a tenth of it. It is saved to disk (:meth:`GraphIndex.save`),
  so opening a large store does not rebuild it.

Both report cosine scores (inner products of unit vectors) and break ties by key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from slm.store.files import Untrusted, data_file, read_manifest, save_pair

Matrix = npt.NDArray[np.float32]
Pairs = list[tuple[int, float]]

#: Profiles with more vectors than this are searched through a graph index.
EXACT_MAX = 20_000
#: HNSW parameters: links per node, candidate list while building and while searching.
GRAPH_LINKS = 16
GRAPH_BUILD_EF = 40
GRAPH_SEARCH_EF = 128
#: Candidate list for the batched searches of ingest (a few strong neighbours per memory).
GRAPH_LINK_EF = 32
#: A filter that admits at most this many keys is searched exactly over those keys.
FILTER_EXACT_MAX = 4096
#: Rebuild the graph when tombstones exceed this share of it.
TOMBSTONE_SHARE = 0.1


def _faiss() -> Any:
    """The ``faiss`` module, imported when a profile first needs a graph index."""
    import faiss

    return faiss


def _ordered(keys: npt.NDArray[np.int64], scores: npt.NDArray[np.float32], k: int) -> Pairs:
    """The ``k`` best (key, score) pairs, highest score first, ties by key (at the k-th
    place too, whatever order the rows are in); -inf dropped."""
    if len(keys) == 0 or k <= 0:
        return []
    if k < len(keys):
        kth = scores[np.argpartition(-scores, k - 1)[k - 1]]
        # fewer than k finite scores: those are all there is
        top = np.flatnonzero(scores >= kth if np.isfinite(kth) else np.isfinite(scores))
        keys, scores = keys[top], scores[top]
    finite = np.isfinite(scores)
    if not finite.all():
        keys, scores = keys[finite], scores[finite]
    order = np.lexsort((keys, -scores))[:k]  # as arrays: a search returns hundreds of pairs
    return list(zip(keys[order].tolist(), scores[order].tolist(), strict=True))


class ExactIndex:
    """Exact top-k cosine search by one matrix-vector product."""

    kind = "exact"

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._matrix: Matrix = np.zeros((0, dim), dtype=np.float32)
        self._keys: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._size = 0
        self._row: dict[int, int] = {}
        self._sum = np.zeros(dim, dtype=np.float64)

    def __len__(self) -> int:
        return self._size

    def contents(self) -> tuple[npt.NDArray[np.int64], Matrix]:
        """(keys, vectors) of everything indexed, in row order."""
        return self._keys[: self._size], self._matrix[: self._size]

    def keys(self) -> list[int]:
        """Every key indexed."""
        return [int(key) for key in self._keys[: self._size]]

    def add(self, keys: list[int], vectors: Matrix) -> None:
        fresh = [i for i, key in enumerate(keys) if key not in self._row]
        if not fresh:
            return
        needed = self._size + len(fresh)
        if needed > len(self._keys):
            capacity = max(needed, 2 * len(self._keys), 1024)
            matrix = np.zeros((capacity, self.dim), dtype=np.float32)
            matrix[: self._size] = self._matrix[: self._size]
            key_arr = np.full(capacity, -1, dtype=np.int64)
            key_arr[: self._size] = self._keys[: self._size]
            self._matrix, self._keys = matrix, key_arr
        rows = slice(self._size, needed)
        self._matrix[rows] = vectors[fresh]
        self._sum += vectors[fresh].sum(axis=0, dtype=np.float64)
        self._keys[rows] = [keys[i] for i in fresh]
        for offset, i in enumerate(fresh):
            self._row[keys[i]] = self._size + offset
        self._size = needed

    def mean(self) -> Matrix:
        """The mean of the stored vectors (zeros when empty)."""
        if self._size == 0:
            return np.zeros(self.dim, dtype=np.float32)
        return (self._sum / self._size).astype(np.float32)

    def get(self, keys: list[int]) -> Matrix | None:
        """Vectors of ``keys`` in order, or None when any key is not in the index."""
        rows = [self._row.get(key) for key in keys]
        if any(row is None for row in rows):
            return None
        return self._matrix[rows]  # type: ignore[index]

    def remove(self, keys: Iterable[int]) -> None:
        """Swap-remove: the last row moves into the hole, so removal is O(1) per key."""
        for key in keys:
            row = self._row.pop(key, None)
            if row is None:
                continue
            self._sum -= self._matrix[row]
            last = self._size - 1
            if row != last:
                moved = int(self._keys[last])
                self._matrix[row] = self._matrix[last]
                self._keys[row] = moved
                self._row[moved] = row
            self._keys[last] = -1
            self._size = last

    def search(
        self, query: Matrix, k: int, allowed: set[int] | None = None, below: int | None = None
    ) -> Pairs:
        if self._size == 0 or k <= 0:
            return []
        keys = self._keys[: self._size]
        scores = self._matrix[: self._size] @ query.astype(np.float32)
        if allowed is not None:
            mask = np.isin(keys, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
            scores = np.where(mask, scores, -np.inf)
        if below is not None:
            scores = np.where(keys < below, scores, -np.inf)
        return _ordered(keys, scores, k)

    def search_many(self, queries: Matrix, k: int) -> list[Pairs]:
        """Top ``k`` for each row of ``queries`` (blockwise, so memory stays bounded)."""
        out: list[Pairs] = []
        keys = self._keys[: self._size]
        for start in range(0, len(queries), 256):
            block = self._matrix[: self._size] @ queries[start : start + 256].T
            out.extend(_ordered(keys, block[:, j], k) for j in range(block.shape[1]))
        return out


class GraphIndex:
    """Approximate top-k cosine search through an HNSW graph (faiss), with tombstones."""

    kind = "graph"

    def __init__(self, dim: int) -> None:
        faiss = _faiss()
        self.dim = dim
        graph = faiss.IndexHNSWSQ(
            dim, faiss.ScalarQuantizer.QT_fp16, GRAPH_LINKS, faiss.METRIC_INNER_PRODUCT
        )
        graph.hnsw.efConstruction = GRAPH_BUILD_EF
        graph.hnsw.efSearch = GRAPH_SEARCH_EF
        self._index: Any = faiss.IndexIDMap2(graph)
        self._present: set[int] = set()
        self._dead: set[int] = set()
        self._sum = np.zeros(dim, dtype=np.float64)
        #: faiss selectors (tombstones, and "not a tombstone") while the tombstones stand
        self._not_dead: list[Any] = []

    def __len__(self) -> int:
        return len(self._present) - len(self._dead)

    def keys(self) -> list[int]:
        """Every key indexed (tombstones left out)."""
        return list(self._present - self._dead)

    def add(self, keys: list[int], vectors: Matrix) -> None:
        fresh = [i for i, key in enumerate(keys) if key not in self._present]
        if not fresh:
            return
        block = np.ascontiguousarray(vectors[fresh], dtype=np.float32)
        ids = np.array([keys[i] for i in fresh], dtype=np.int64)
        self._index.add_with_ids(block, ids)
        self._present.update(ids.tolist())
        self._sum += block.sum(axis=0, dtype=np.float64)

    def mean(self) -> Matrix:
        size = len(self)
        if size == 0:
            return np.zeros(self.dim, dtype=np.float32)
        return (self._sum / size).astype(np.float32)

    def get(self, keys: list[int]) -> Matrix | None:
        asked = set(keys)  # set operations: a window's thousand keys checked in C
        if not self._present.issuperset(asked) or not self._dead.isdisjoint(asked):
            return None
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        out: Matrix = self._index.reconstruct_batch(np.array(keys, dtype=np.int64))
        # Half precision moves a unit vector's length by up to about 1e-4: back onto the
        # sphere, so cosines stay within [-1, 1].
        lengths = np.sqrt(np.einsum("ij,ij->i", out, out))
        out /= np.maximum(lengths, 1e-12)[:, None]
        return out

    def remove(self, keys: Iterable[int]) -> None:
        gone = [key for key in keys if key in self._present and key not in self._dead]
        if not gone:
            return
        vectors = self._index.reconstruct_batch(np.array(gone, dtype=np.int64))
        self._sum -= vectors.sum(axis=0, dtype=np.float64)
        self._dead.update(gone)
        self._not_dead = []
        if len(self._dead) > TOMBSTONE_SHARE * max(len(self._present), 1):
            self._compact()

    def _compact(self) -> None:
        """Rebuild the graph from the live vectors, dropping the tombstones."""
        live = np.array(sorted(self._present - self._dead), dtype=np.int64)
        vectors = self._index.reconstruct_batch(live) if len(live) else None
        fresh = GraphIndex(self.dim)
        if vectors is not None:
            fresh.add(live.tolist(), vectors)
        self._index, self._present, self._dead = fresh._index, fresh._present, set()
        self._sum, self._not_dead = fresh._sum, []

    def _selector(self, allowed: set[int] | None, below: int | None) -> list[Any]:
        """faiss ID selectors for live keys (not tombstones) that pass the filters; the last
        one combines them (none: every key passes). Searches skip unselected keys inside the
        graph walk. faiss holds raw pointers, so the caller keeps the whole list alive."""
        faiss = _faiss()
        kept: list[Any] = []
        conditions: list[Any] = []
        if self._dead:
            if not self._not_dead:  # built once per set of tombstones, not per search
                dead = faiss.IDSelectorBatch(np.fromiter(self._dead, dtype=np.int64))
                self._not_dead = [dead, faiss.IDSelectorNot(dead)]
            kept.append(self._not_dead[0])
            conditions.append(self._not_dead[1])
        if allowed is not None:
            conditions.append(faiss.IDSelectorBatch(np.fromiter(allowed, dtype=np.int64)))
        if below is not None:
            conditions.append(faiss.IDSelectorRange(0, below))
        kept += conditions
        for other in conditions[1:]:
            kept.append(faiss.IDSelectorAnd(kept[-1], other))
        return kept

    def _raw(
        self, queries: Matrix, n: int, ef: int = GRAPH_SEARCH_EF, selectors: list[Any] | None = None
    ) -> list[Pairs]:
        faiss = _faiss()
        params = faiss.SearchParametersHNSW(efSearch=max(ef, n))
        if selectors:
            params.sel = selectors[-1]
        scores, ids = self._index.search(np.ascontiguousarray(queries), n, params=params)
        out: list[Pairs] = []
        for row_ids, row_scores in zip(ids.tolist(), scores.tolist(), strict=True):
            # Scores against half-precision vectors can pass 1 by about 1e-4.
            pairs = [(k, min(s, 1.0)) for k, s in zip(row_ids, row_scores, strict=True) if k >= 0]
            pairs.sort(key=lambda p: (-p[1], p[0]))
            out.append(pairs)
        return out

    def _live(self, keys: Iterable[int], below: int | None) -> list[int]:
        live = self._present - self._dead if self._dead else self._present
        return sorted(k for k in keys if k in live and (below is None or k < below))

    def search(
        self, query: Matrix, k: int, allowed: set[int] | None = None, below: int | None = None
    ) -> Pairs:
        if len(self) == 0 or k <= 0:
            return []
        if allowed is not None and len(allowed) <= FILTER_EXACT_MAX:
            return self._exact(self._live(allowed, below), query, k)
        selectors = self._selector(allowed, below)
        pairs = self._raw(query.reshape(1, -1).astype(np.float32), k, selectors=selectors)[0]
        if len(pairs) < k and (allowed is not None or below is not None):
            # The filter admits too few keys for the walk to reach: scan them exactly.
            keys = self._live(allowed if allowed is not None else self._present, below)
            return self._exact(keys, query, k)
        return pairs[:k]

    def _exact(self, keys: list[int], query: Matrix, k: int) -> Pairs:
        """Exact top ``k`` among ``keys``, a block at a time (bounded memory)."""
        best: Pairs = []
        for start in range(0, len(keys), 50_000):
            block = keys[start : start + 50_000]
            vectors = self.get(block)
            assert vectors is not None
            best = _ordered(
                np.array([key for key, _ in best] + block, dtype=np.int64),
                np.concatenate([np.array([s for _, s in best], dtype=np.float32), vectors @ query]),
                k,
            )
        return best

    def search_many(self, queries: Matrix, k: int) -> list[Pairs]:
        if len(self) == 0:
            return [[] for _ in range(len(queries))]
        n = min(k, len(self))
        rows = self._raw(queries.astype(np.float32), n, GRAPH_LINK_EF, self._selector(None, None))
        return [pairs[:k] for pairs in rows]

    # -- persistence --------------------------------------------------------------------

    def save(self, folder: Path, name: str, watermark: dict[str, Any]) -> None:
        """Write the graph and its state under ``folder`` as a saved pair
        (:func:`slm.store.files.save_pair`: a crash leaves the previous one whole)."""
        faiss = _faiss()

        def write(path: Path) -> None:
            faiss.write_index(self._index, str(path))

        state = {"kind": self.kind, "dim": self.dim, "sum": self._sum.tolist()}
        save_pair(folder, name, "faiss", write, {**watermark, **state, "dead": sorted(self._dead)})

    @classmethod
    def load(
        cls, folder: Path, name: str, accept: Callable[[dict[str, Any]], bool], span: int = 1
    ) -> tuple[GraphIndex, dict[str, Any]] | None:
        """The saved graph and its manifest, when there is one that ``accept`` approves;
        None when there is none (the caller builds from the rows). Raises
        :class:`slm.store.files.Untrusted` when its file is not the one saved
        (:func:`slm.store.files.data_file`) or what it holds is not well formed: the
        dimension, the keys (each below the saved memories' last, ``span`` keys a memory),
        the tombstones among them, the vector sum."""
        manifest = read_manifest(folder / f"{name}.json")
        if manifest is None or not accept(manifest):
            return None
        path = data_file(folder, name, "faiss", manifest)
        dim, dead, total = manifest.get("dim"), manifest.get("dead"), manifest.get("sum")
        top = manifest.get("max_key")
        if not isinstance(dim, int) or not 0 < dim <= 65_536:
            raise Untrusted("its dimension is not a number of a vector's size")
        if not isinstance(top, int) or not 0 <= top <= 2**48:
            raise Untrusted("its last memory key is not a key")
        if not isinstance(dead, list) or not all(isinstance(k, int) for k in dead):
            raise Untrusted("its tombstones are not a list of keys")
        if not isinstance(total, list) or len(total) != dim:
            raise Untrusted("its vector sum is not one number a dimension")
        faiss = _faiss()
        try:
            index = faiss.read_index(str(path))
            ids = faiss.vector_to_array(index.id_map)
            vector_sum = np.array(total, dtype=np.float64)
        except (RuntimeError, AttributeError, ValueError, TypeError) as exc:
            raise Untrusted(f"its graph cannot be read: {str(exc)[:200]}") from None
        if index.d != dim or index.ntotal != len(ids):
            raise Untrusted("its graph's dimension or size does not match its manifest")
        if len(ids) and (ids.min() < 0 or ids.max() >= (top + 1) * span):
            raise Untrusted("its graph holds keys outside the memories saved")
        present = set(ids.tolist())
        if len(present) != len(ids) or not present.issuperset(dead):
            raise Untrusted("its graph's keys repeat, or its tombstones are not among them")
        if not np.isfinite(vector_sum).all():
            raise Untrusted("its vector sum is not finite")
        graph = cls(dim)
        graph._index, graph._present, graph._dead = index, present, set(dead)
        graph._sum = vector_sum
        return graph, manifest


def graph_from(exact: ExactIndex) -> GraphIndex:
    """A graph index holding everything ``exact`` holds."""
    graph = GraphIndex(exact.dim)
    keys, vectors = exact.contents()
    for start in range(0, len(keys), 50_000):
        graph.add(keys[start : start + 50_000].tolist(), vectors[start : start + 50_000])
    return graph


VectorIndex = ExactIndex | GraphIndex
