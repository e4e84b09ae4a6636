"""The ``Embedder`` protocol: one method that turns texts into unit vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

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
        """One row per text, each of unit length; a text longer than the model reads is
        embedded by its beginning."""
        ...

    def health(self) -> dict[str, object]: ...


def embed(embedder: Embedder, text: str) -> Matrix:
    """The unit vector of one text (a row of :meth:`Embedder.embed_batch`)."""
    vector: Matrix = embedder.embed_batch([text])[0]
    return vector


def normalise(matrix: Matrix) -> Matrix:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    out: Matrix = (matrix / np.clip(norms, 1e-12, None)).astype(np.float32)
    return out


@runtime_checkable
class PassageEmbedder(Embedder, Protocol):
    """An embedder that can also read a long text whole, as passages (a capability: an
    embedder without it is used through :func:`embed_passages`, one passage per text)."""

    #: A text of at most this many characters always fits in one passage.
    window: int

    def embed_passages(self, texts: Sequence[str], limit: int) -> list[Matrix]:
        """Each text as overlapping passages the model reads whole, at most ``limit`` per
        text: a matrix per text whose first row is that text's :meth:`embed_batch` row
        (a text that fits in one passage has only that row)."""
        ...


def embed_passages(embedder: Embedder, texts: Sequence[str], limit: int) -> list[Matrix]:
    """``embedder``'s passages of each text, or its one vector per text when it cannot
    read passages."""
    if isinstance(embedder, PassageEmbedder):
        return embedder.embed_passages(texts, limit)
    vectors = embedder.embed_batch(texts)
    return [vectors[i : i + 1] for i in range(len(texts))]


def reads_passages(embedder: Embedder, text: str) -> bool:
    """Whether ``embedder`` may read ``text`` as more than one passage."""
    return isinstance(embedder, PassageEmbedder) and len(text) > embedder.window
