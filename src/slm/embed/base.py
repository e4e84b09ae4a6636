"""The ``Embedder`` protocol: one method that turns texts into unit vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


class Embedder(Protocol):
    """Maps texts to L2-normalised float32 vectors of a fixed dimension.

    ``name`` identifies the vector space: a store remembers it and refuses to mix spaces.
    """

    name: str
    dim: int

    def embed_batch(self, texts: Sequence[str]) -> Matrix:
        """One row per text, each of unit length."""
        ...

    def health(self) -> dict[str, object]: ...


def normalise(matrix: Matrix) -> Matrix:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    out: Matrix = (matrix / np.clip(norms, 1e-12, None)).astype(np.float32)
    return out
