"""Dense semantic channel: cosine similarity between the query and memory embeddings."""

from __future__ import annotations

from slm.channels.base import SHARED_NEAREST, Health, Hit, Query, ranked
from slm.settings import Settings
from slm.store import Store


class SemanticChannel:
    name = "semantic"
    primary = True
    standalone = False

    def __init__(self, store: Store, settings: Settings) -> None:
        self._store = store

    def health(self) -> Health:
        return Health(True)

    def candidates(self, query: Query, k: int) -> list[Hit]:
        return ranked(query.nearest(self._store, max(k, SHARED_NEAREST))[:k], k)
