"""Embedding backends behind the one-method :class:`Embedder` protocol.

:data:`EMBEDDERS` is the one list of the backends a setting can name (``Settings.embedder``,
``SLM_EMBEDDER``); a new backend is a module and one line there. Any object with
``embed_batch`` can also be passed to ``Memory(..., embedder=)`` directly.
"""

from __future__ import annotations

import importlib

from slm.embed.base import (
    Embedder,
    Matrix,
    PassageEmbedder,
    embed,
    embed_passages,
    normalise,
    reads_passages,
)
from slm.errors import ConfigError

#: Setting name -> "module:Class" of the backend, imported when first asked for.
EMBEDDERS: dict[str, str] = {
    "minilm": "slm.embed.minilm:MiniLMEmbedder",
    "fake": "slm.embed.fake:FakeEmbedder",
}

__all__ = [
    "EMBEDDERS",
    "Embedder",
    "Matrix",
    "PassageEmbedder",
    "embed",
    "embed_passages",
    "make_embedder",
    "normalise",
    "reads_passages",
]


def make_embedder(name: str) -> Embedder:
    """A new instance of the embedder registered under ``name`` in :data:`EMBEDDERS`."""
    if name not in EMBEDDERS:
        raise ConfigError(f"unknown embedder {name!r}; known: {', '.join(EMBEDDERS)}")
    module, _, attribute = EMBEDDERS[name].partition(":")
    backend: Embedder = getattr(importlib.import_module(module), attribute)()
    return backend
