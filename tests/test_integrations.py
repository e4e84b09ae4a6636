"""slm inside agent frameworks (issue #31), tested against the real libraries (the test
extras install them): a LangChain retriever in an LCEL chain, a LlamaIndex retriever, and a
LangGraph long-term memory store. No LLM runs: each "agent" answers with what slm returned,
and the tests assert on that."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slm import Memory, Settings
from slm.embed.minilm import MiniLMEmbedder

CHAT = [
    {"role": "user", "name": "Maya", "content": "I live in Porto with my two cats.",
     "time": "2023-01-05T10:00:00Z"},
    {"role": "assistant", "content": "Porto is a lovely city.", "time": "2023-01-05T10:00:05Z"},
    {"role": "user", "name": "Maya", "content": "My sister Ana is a nurse in Braga.",
     "time": "2023-01-05T10:01:00Z"},
    {"role": "user", "name": "Maya", "content": "We finally moved to Lisbon last week!",
     "time": "2024-02-10T09:00:00Z"},
]  # fmt: skip


@pytest.fixture
def memory(tmp_path: Path, minilm: MiniLMEmbedder) -> Iterator[Memory]:
    with Memory(tmp_path / "agent.db", embedder=minilm, settings=Settings()) as memory:
        yield memory


def test_a_langchain_chain_answers_from_slm(memory: Memory) -> None:
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    from slm.integrations.langchain import SlmRetriever

    store = RunnableLambda(lambda messages: memory.remember_conversation(messages))
    store.invoke(CHAT)  # the agent's turn: what was said goes into memory
    retriever = SlmRetriever(memory=memory, k=3)

    def answer(inputs: dict[str, Any]) -> str:  # no LLM: the best memory is the answer
        return str(inputs["context"][0].page_content) if inputs["context"] else "I don't know"

    chain = {"context": retriever, "question": RunnablePassthrough()} | RunnableLambda(answer)
    assert "Lisbon" in chain.invoke("Where does Maya live now?")
    documents = retriever.invoke("What does Ana do for a living?")
    assert "nurse" in documents[0].page_content
    fields = documents[0].metadata
    assert fields["rank_position"] == 1 and 0 < fields["relevance_score"] <= 1
    assert fields["role"] == "user" and fields["abstained"] is False and fields["id"]
    # Recall options pass through: only the assistant's words.
    said = SlmRetriever(memory=memory, k=3, options={"metadata": {"role": "assistant"}})
    assert [d.metadata["role"] for d in said.invoke("Porto")] == ["assistant"]
    # Nothing stored answers it: no documents rather than unrelated ones.
    assert retriever.invoke("What is the boiling point of tungsten?") == []


def test_a_llamaindex_retriever_answers_from_slm(memory: Memory) -> None:
    from llama_index.core.schema import QueryBundle

    from slm.integrations.llamaindex import SlmLlamaRetriever

    memory.remember_conversation(CHAT)
    retriever = SlmLlamaRetriever(memory, k=3)
    nodes = retriever.retrieve("Where does Maya live now?")
    assert "Lisbon" in nodes[0].node.get_content()
    assert nodes[0].score == nodes[0].node.metadata["relevance_score"]
    assert retriever.retrieve(QueryBundle("What does Ana do?"))[0].node.metadata["source"] == "Maya"
    assert retriever.retrieve("What is the boiling point of tungsten?") == []


def test_a_langgraph_agent_remembers_and_answers_through_slm(memory: Memory) -> None:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.store.base import BaseStore

    from slm.integrations.langgraph import SlmStore

    class State(TypedDict, total=False):
        user: str
        said: list[str]
        question: str
        answer: str

    def remember(state: State, *, store: BaseStore) -> State:
        for number, text in enumerate(state.get("said", [])):
            store.put(("users", state["user"]), f"fact-{number}", {"text": text})
        return {}

    def answer(state: State, *, store: BaseStore) -> State:
        found = store.search(("users", state["user"]), query=state["question"], limit=3)
        return {"answer": found[0].value["text"] if found else "I don't know"}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    store = SlmStore(memory)
    graph = builder.compile(store=store)
    first = graph.invoke(
        {
            "user": "maya",
            "said": ["Maya lives in Porto.", "Maya's sister Ana is a nurse."],
            "question": "What does Ana do?",
        }
    )
    assert "nurse" in first["answer"]
    graph.invoke({"user": "tom", "said": ["Tom lives in Oslo."], "question": "Where?"})
    later = graph.invoke({"user": "maya", "question": "Where does Maya live?"})
    assert "Porto" in later["answer"]  # Tom's namespace is not Maya's

    # The store's own operations, as LangGraph defines them.
    item = store.get(("users", "maya"), "fact-0")
    assert item is not None and item.value == {"text": "Maya lives in Porto."}
    store.put(("users", "maya"), "fact-0", {"text": "Maya moved to Lisbon.", "kind": "home"})
    assert store.get(("users", "maya"), "fact-0").value["text"] == "Maya moved to Lisbon."
    assert [i.key for i in store.search(("users", "maya"), filter={"kind": "home"})] == ["fact-0"]
    assert store.list_namespaces(prefix=("users",)) == [("users", "maya"), ("users", "tom")]
    assert store.list_namespaces(max_depth=1) == [("users",)]
    store.delete(("users", "tom"), "fact-0")
    assert store.get(("users", "tom"), "fact-0") is None
    with pytest.raises(Exception, match="already stored under key"):
        store.put(("users", "maya"), "copy", {"text": "Maya moved to Lisbon."})


def test_the_adapters_read_and_write_one_users_memories(memory: Memory) -> None:
    """Issue 61: an owner given to an adapter holds for every call it makes."""
    from slm.integrations.langchain import SlmRetriever
    from slm.integrations.langgraph import SlmStore
    from slm.integrations.llamaindex import SlmLlamaRetriever

    memory.remember_conversation(CHAT, user_id="maya")
    memory.remember("I live in Oslo.", user_id="tom")
    for user, city in (("maya", "Lisbon"), ("tom", "Oslo")):
        documents = SlmRetriever(memory=memory, k=5, user_id=user).invoke("Where do I live?")
        assert city in documents[0].page_content
        assert {d.metadata["user_id"] for d in documents} == {user}
        nodes = SlmLlamaRetriever(memory, k=5, user_id=user).retrieve("Where do I live?")
        assert {n.node.metadata["user_id"] for n in nodes} == {user}
    maya, tom = SlmStore(memory, user_id="maya"), SlmStore(memory, user_id="tom")
    maya.put(("prefs",), "seat", {"text": "Window seat please"})
    maya.put(("prefs",), "seat", {"text": "Window seat please", "kind": "travel"})
    assert tom.get(("prefs",), "seat") is None and tom.list_namespaces() == []
    held = maya.get(("prefs",), "seat")
    assert held is not None and held.value["kind"] == "travel"
    assert [r.metadata["user_id"] for r in memory.list(metadata={"lg_key": "seat"})] == ["maya"]
    assert [i.key for i in maya.search(("prefs",), query="seat")] == ["seat"]
    assert tom.search(("prefs",), query="seat") == []
