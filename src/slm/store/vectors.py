"""An in-process exact cosine index over unit vectors, one per profile.

Vectors live in the store's rows (little-endian float32 blobs); this index is a cache
of them, loaded once per process and kept in step with the rows by the owning store.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


class VectorIndex:
    """Exact top-k cosine search by one matrix-vector product."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._matrix: Matrix = np.zeros((0, dim), dtype=np.float32)
        self._keys: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._size = 0
        self._row: dict[int, int] = {}
        self._sum = np.zeros(dim, dtype=np.float64)

    def __len__(self) -> int:
        return self._size

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
    ) -> list[tuple[int, float]]:
        if self._size == 0 or k <= 0:
            return []
        keys = self._keys[: self._size]
        scores = self._matrix[: self._size] @ query.astype(np.float32)
        if allowed is not None:
            mask = np.isin(keys, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
            scores = np.where(mask, scores, -np.inf)
        if below is not None:
            scores = np.where(keys < below, scores, -np.inf)
        k = min(k, self._size)
        top = np.argpartition(-scores, k - 1)[:k] if k < self._size else np.arange(self._size)
        pairs = [(int(keys[i]), float(scores[i])) for i in top if np.isfinite(scores[i])]
        pairs.sort(key=lambda p: (-p[1], p[0]))
        return pairs
