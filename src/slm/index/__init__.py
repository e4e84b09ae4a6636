"""What recall reads on its hot path, held in this process and kept current from the
store's change feed (:mod:`slm.store.feed`), the same on every store: the vector indexes
(:mod:`slm.index.vectors`, the exact and graph kinds; :mod:`slm.index.vector_cache`, one
per profile following the feed) and the edge arrays (:mod:`slm.index.edges`, each
profile's memory-to-memory edges). The store keeps the rows of record and knows nothing of
these; :class:`Indexes` holds them beside a store, built from its rows at any time."""

from __future__ import annotations

from typing import Any

from slm.index.edges import EdgeCache
from slm.index.vector_cache import Followed, Vectors

__all__ = ["EdgeCache", "Followed", "Indexes", "Vectors"]


class Indexes:
    """A store's indexes in this process: its vector indexes (:attr:`vectors`) and its edge
    arrays (:attr:`edges`), each following the store's change feed from its own sequence
    number when the store's :meth:`~Followed.version` says a profile may have changed, and
    saved in the store's ``folder`` when large. Whoever opens a store holds them beside it
    (:class:`slm.engine.Memory`), and closes them before it."""

    def __init__(self, store: Followed) -> None:
        self.vectors = Vectors(store)
        self.edges = EdgeCache(store)

    def info(self) -> dict[str, Any]:
        """What health reports of them, by profile."""
        return {"vector_indexes": self.vectors.info(), "edge_arrays": self.edges.info()}

    def rebuild(self, profile: str) -> int:
        """The profile's vector indexes built again from the rows (the edge arrays follow
        the feed's ``rederived`` change of a reindex); the memory vectors' index's size."""
        return self.vectors.rebuild(profile)

    def close(self) -> None:
        """Save what is large and changed, where the store gives a folder."""
        self.vectors.save_all()
