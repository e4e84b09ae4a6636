"""Embedding backends behind the one-method :class:`Embedder` protocol."""

from __future__ import annotations

from slm.embed.base import (
    Embedder,
    Matrix,
    PassageEmbedder,
    embed_passages,
    normalise,
    reads_passages,
)
from slm.errors import ConfigError

__all__ = [
    "Embedder",
    "Matrix",
    "PassageEmbedder",
    "embed_passages",
    "make_embedder",
    "normalise",
    "reads_passages",
]


def make_embedder(name: str) -> Embedder:
    """The embedder registered under ``name`` (``minilm`` or ``fake``)."""
    if name == "minilm":
        from slm.embed.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if name == "fake":
        from slm.embed.fake import FakeEmbedder

        return FakeEmbedder()
    raise ConfigError(f"unknown embedder {name!r}")
