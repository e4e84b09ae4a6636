"""A LlamaIndex retriever backed by slm (the ``llamaindex`` extra).

    from slm.integrations.llamaindex import SlmLlamaRetriever
    retriever = SlmLlamaRetriever(memory, k=5, user_id="alice")   # alice's memories only
    nodes = retriever.retrieve("Where does Maya live now?")

Each node is one recalled memory (``TextNode`` with the memory's id and text, the contract
fields in its metadata; :func:`slm.integrations.contract_fields`), scored with its
``relevance_score``. ``options`` are passed to :meth:`slm.Memory.recall` (``user_id=``
reads one user's memories: docs/scopes.md). When the recall
abstains no node is returned, unless ``keep_abstained``.
"""

from __future__ import annotations

from typing import Any

from slm.engine import Memory
from slm.errors import ConfigError, install_hint
from slm.integrations import contract_fields

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # the extra is optional; say which one instead of a traceback
    raise ConfigError(
        f"the LlamaIndex retriever needs the extra: {install_hint('llamaindex')}"
    ) from exc


class SlmLlamaRetriever(BaseRetriever):
    """slm's recall as a LlamaIndex retriever."""

    def __init__(
        self, memory: Memory, k: int = 10, *, keep_abstained: bool = False, **options: Any
    ) -> None:
        super().__init__()
        self.memory, self.k, self.options = memory, k, options
        self.keep_abstained = keep_abstained

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        response = self.memory.recall(query_bundle.query_str, k=self.k, **self.options)
        if response.abstained and not self.keep_abstained:
            return []
        return [
            NodeWithScore(
                node=TextNode(
                    id_=r.memory.id, text=r.memory.content, metadata=contract_fields(r, response)
                ),
                score=r.relevance_score,
            )
            for r in response.results
        ]
