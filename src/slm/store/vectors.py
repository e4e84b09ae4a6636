"""In-process vector indexes over unit vectors, one per profile.

Vectors live in the store's rows (little-endian float32 blobs); an index is a cache of
them, kept in step with the rows by the owning store. Two kinds:

- :class:`ExactIndex`: one matrix, searched by a matrix-vector product. Exact, and the
  fastest choice for small profiles (under :data:`EXACT_MAX` vectors, about a millisecond).
- :class:`GraphIndex`: a navigable small-world graph (HNSW, from ``faiss``) for large
  profiles: a search visits a few thousand vectors whatever the size, an insert costs about
  the same as a search. HNSW cannot delete, so forgotten keys become tombstones that
  searches skip; the graph is rebuilt when they exceed a tenth of it. It is saved to disk
  (:meth:`GraphIndex.save`), so opening a large store does not rebuild it.

Both report cosine scores (inner products of unit vectors) and break ties by key.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

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
    """The ``k`` best (key, score) pairs, highest score first, ties by key; -inf dropped."""
    if len(keys) == 0 or k <= 0:
        return []
    if k < len(keys):
        top = np.argpartition(-scores, k - 1)[:k]
        keys, scores = keys[top], scores[top]
    pairs = [(int(a), float(b)) for a, b in zip(keys, scores, strict=True) if np.isfinite(b)]
    pairs.sort(key=lambda p: (-p[1], p[0]))
    return pairs


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
        graph = faiss.IndexHNSWFlat(dim, GRAPH_LINKS, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = GRAPH_BUILD_EF
        graph.hnsw.efSearch = GRAPH_SEARCH_EF
        self._index: Any = faiss.IndexIDMap2(graph)
        self._present: set[int] = set()
        self._dead: set[int] = set()
        self._sum = np.zeros(dim, dtype=np.float64)

    def __len__(self) -> int:
        return len(self._present) - len(self._dead)

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
        if any(key not in self._present or key in self._dead for key in keys):
            return None
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        out: Matrix = self._index.reconstruct_batch(np.array(keys, dtype=np.int64))
        return out

    def remove(self, keys: Iterable[int]) -> None:
        gone = [key for key in keys if key in self._present and key not in self._dead]
        if not gone:
            return
        vectors = self._index.reconstruct_batch(np.array(gone, dtype=np.int64))
        self._sum -= vectors.sum(axis=0, dtype=np.float64)
        self._dead.update(gone)
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
        self._sum = fresh._sum

    def _raw(self, queries: Matrix, n: int, ef: int = GRAPH_SEARCH_EF) -> tuple[Any, Any]:
        faiss = _faiss()
        params = faiss.SearchParametersHNSW(efSearch=max(ef, n))
        scores, ids = self._index.search(np.ascontiguousarray(queries), n, params=params)
        return scores, ids

    def search(
        self, query: Matrix, k: int, allowed: set[int] | None = None, below: int | None = None
    ) -> Pairs:
        if len(self) == 0 or k <= 0:
            return []
        if allowed is not None and len(allowed) <= FILTER_EXACT_MAX:
            wanted = sorted(
                key for key in allowed if key in self._present and key not in self._dead
            )
            if below is not None:
                wanted = [key for key in wanted if key < below]
            vectors = self.get(wanted)
            assert vectors is not None
            return _ordered(np.array(wanted, dtype=np.int64), vectors @ query, k)
        n = k + len(self._dead)
        total = len(self._present)
        while True:
            n = min(n, total)
            scores, ids = self._raw(query.reshape(1, -1).astype(np.float32), n)
            pairs = [
                (int(key), float(score))
                for key, score in zip(ids[0].tolist(), scores[0].tolist(), strict=True)
                if key >= 0
                and key not in self._dead
                and (allowed is None or key in allowed)
                and (below is None or key < below)
            ]
            if len(pairs) >= k or n >= total:
                pairs.sort(key=lambda p: (-p[1], p[0]))
                return pairs[:k]
            n *= 4

    def search_many(self, queries: Matrix, k: int) -> list[Pairs]:
        if len(self) == 0:
            return [[] for _ in range(len(queries))]
        n = min(k + len(self._dead), len(self._present))
        scores, ids = self._raw(queries.astype(np.float32), n, GRAPH_LINK_EF)
        out: list[Pairs] = []
        for row_ids, row_scores in zip(ids.tolist(), scores.tolist(), strict=True):
            pairs = [
                (key, score)
                for key, score in zip(row_ids, row_scores, strict=True)
                if key >= 0 and key not in self._dead
            ]
            pairs.sort(key=lambda p: (-p[1], p[0]))
            out.append(pairs[:k])
        return out

    # -- persistence --------------------------------------------------------------------

    def save(self, folder: Path, name: str, watermark: dict[str, Any]) -> None:
        """Write the graph and its state under ``folder``: a new data file, then the
        ``{name}.json`` manifest that names it (replaced atomically, so a crash leaves the
        previous consistent pair), then the old data files go."""
        faiss = _faiss()
        folder.mkdir(parents=True, exist_ok=True)
        data = f"{name}.{secrets.token_hex(6)}.faiss"
        faiss.write_index(self._index, str(folder / data))
        manifest = {
            **watermark,
            "kind": self.kind,
            "dim": self.dim,
            "file": data,
            "sum": self._sum.tolist(),
            "dead": sorted(self._dead),
        }
        _write_atomically(folder / f"{name}.json", json.dumps(manifest))
        for old in folder.glob(f"{name}.*.faiss"):
            if old.name != data:
                old.unlink(missing_ok=True)

    @classmethod
    def load(cls, folder: Path, name: str) -> tuple[GraphIndex, dict[str, Any]] | None:
        """The saved graph and its manifest, or None when there is none (or it is unreadable:
        the caller then rebuilds from the rows)."""
        faiss = _faiss()
        try:
            manifest = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
            index = faiss.read_index(str(folder / manifest["file"]))
        except (OSError, ValueError, KeyError, RuntimeError):
            return None
        graph = cls(int(manifest["dim"]))
        graph._index = index
        graph._present = set(faiss.vector_to_array(index.id_map).tolist())
        graph._dead = set(manifest["dead"])
        graph._sum = np.array(manifest["sum"], dtype=np.float64)
        return graph, manifest


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def graph_from(exact: ExactIndex) -> GraphIndex:
    """A graph index holding everything ``exact`` holds."""
    graph = GraphIndex(exact.dim)
    keys, vectors = exact.contents()
    for start in range(0, len(keys), 50_000):
        graph.add(keys[start : start + 50_000].tolist(), vectors[start : start + 50_000])
    return graph


VectorIndex = ExactIndex | GraphIndex
