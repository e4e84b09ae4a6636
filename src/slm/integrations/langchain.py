"""A LangChain retriever backed by slm (the ``langchain`` extra).

    from slm.integrations.langchain import SlmRetriever
    retriever = SlmRetriever(memory=memory, k=5, user_id="alice")   # alice's memories only
    documents = retriever.invoke("Where does Maya live now?")

Each document is one recalled memory: ``page_content`` its text, ``id`` its id, and the
contract fields in ``metadata`` (``relevance_score``, ``rank_position``, ``abstained``...;
:func:`slm.integrations.contract_fields`). ``options`` are passed to
:meth:`slm.Memory.recall` (``source``, ``tags``, ``after``, ``before``, ``metadata``,
``as_of``...). When the recall abstains (nothing stored answers the question well enough)
no document is returned, unless ``keep_abstained``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from slm.engine import Memory
from slm.errors import ConfigError, install_hint
from slm.integrations import contract_fields

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, Field
except ImportError as exc:  # the extra is optional; say which one instead of a traceback
    raise ConfigError(
        f"the LangChain retriever needs the extra: {install_hint('langchain')}"
    ) from exc


class SlmRetriever(BaseRetriever):
    """slm's recall as a LangChain retriever."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Memory
    k: int = 10
    options: dict[str, Any] = Field(default_factory=dict)
    keep_abstained: bool = False
    #: whose memories it reads (docs/scopes.md); None: every owner's
    user_id: str | int | None = None
    agent_id: str | int | None = None
    run_id: str | int | None = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        owner = {"user_id": self.user_id, "agent_id": self.agent_id, "run_id": self.run_id}
        given: dict[str, Any] = {k: v for k, v in owner.items() if v is not None}
        response = self.memory.recall(query, k=self.k, **given, **self.options)
        if response.abstained and not self.keep_abstained:
            return []
        return [
            Document(
                page_content=r.memory.content, id=r.memory.id, metadata=contract_fields(r, response)
            )
            for r in response.results
        ]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        sync = run_manager.get_sync()
        return await asyncio.to_thread(self._get_relevant_documents, query, run_manager=sync)
