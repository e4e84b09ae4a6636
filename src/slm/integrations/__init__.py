"""slm inside the agent frameworks people already use (docs/integrations.md#frameworks).

Each integration is an optional extra and a thin adapter over :class:`slm.Memory`:
:mod:`slm.integrations.langchain` (a LangChain retriever), :mod:`slm.integrations.llamaindex`
(a LlamaIndex retriever) and :mod:`slm.integrations.langgraph` (a LangGraph long-term
memory store). A retrieved memory carries slm's contract fields in its metadata, so the
agent sees what slm measured, not only the text.
"""

from __future__ import annotations

from typing import Any

from slm.contract import RecallResponse, RecallResult


def contract_fields(result: RecallResult, response: RecallResponse) -> dict[str, Any]:
    """What a framework's document or node carries of one result: the memory's own
    metadata, its id and times, the scores and rank, and whether the recall abstained."""
    memory = result.memory
    return {
        **memory.metadata,
        "id": memory.id,
        "source": memory.source,
        "event_time": memory.to_dict()["event_time"],
        "relevance_score": result.relevance_score,
        "ranking_score": result.ranking_score,
        "rank_position": result.rank_position,
        "superseded_by": memory.superseded_by,
        "possibly_superseded_by": list(result.possibly_superseded_by),
        "abstained": response.abstained,
        "answer_confidence": response.answer_confidence,
        "query_id": response.query_id,
    }
