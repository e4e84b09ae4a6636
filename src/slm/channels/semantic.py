"""Dense semantic channel: cosine similarity between the query and memory embeddings."""

from __future__ import annotations

from typing import ClassVar

from slm.channels.base import SHARED_NEAREST, ChannelDefaults, Context, Hit, Need, Role, ranked


class SemanticChannel(ChannelDefaults):
    name: ClassVar[str] = "semantic"
    weight: ClassVar[float] = 1.0
    needs: ClassVar[frozenset[Need]] = frozenset({"vector"})
    role: ClassVar[Role] = "plain"
    index: ClassVar[str | None] = "embeddings"

    def candidates(self, context: Context, k: int) -> list[Hit]:
        return ranked(context.nearest(max(k, SHARED_NEAREST))[:k], k)
