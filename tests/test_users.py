"""Users as first-class as in Mem0 (issue 61): whose memory given by name on every call
(``user_id=``...), conversations that belong to someone, forgetting a user whole, and the
history of a memory. Every storage case runs on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest

from slm import AsyncMemory, Memory, Settings
from slm.copy.jsonl import export_jsonl
from slm.errors import InvalidInput, NotFound
from slm.models import RecallRequest

FAKE = Settings(embedder="fake")

CHAT = [
    {"role": "user", "content": "I live in Porto and I work as a nurse."},
    {"role": "assistant", "content": "Noted: Porto, and nursing."},
    {"role": "user", "content": "My dog is called Rex."},
]

#: Every column that names a memory by its key, table by table: what forgetting must clear.
KEY_COLUMNS = {
    "embeddings": ("key",),
    "lex_docs": ("key",),
    "lex_postings": ("key",),
    "memory_times": ("key",),
    "edges": ("src", "dst"),
    "mentions": ("key",),
    "passages": ("memory",),
    "fact_slots": ("key",),
    "fact_updates": ("older", "newer"),
    "fact_dismissed": ("older", "newer"),
    "memory_fields": ("key",),
}


def _ids(records: Any) -> set[str]:
    return {r.id for r in records}


# -- whose memory, by name --------------------------------------------------------------------


def test_user_id_by_name_is_the_metadata_it_is_stored_as(memory: Memory) -> None:
    alice = memory.remember("I prefer dark mode", user_id="alice")
    bob = memory.remember("I prefer dark mode", user_id="bob", metadata={"app": "web"})
    same = memory.remember("I prefer dark mode", metadata={"user_id": "alice"})
    assert alice.created and bob.created and not same.created and same.id == alice.id
    assert dict(alice.metadata) == {"user_id": "alice"}
    assert dict(bob.metadata) == {"user_id": "bob", "app": "web"}
    for user, wanted in (("alice", alice.id), ("bob", bob.id)):
        assert memory.recall("dark mode", user_id=user).ids == [wanted]
        assert [r.id for r in memory.list(user_id=user)] == [wanted]
        assert memory.count(user_id=user) == 1
        request = RecallRequest("dark mode", user_id=user)
        assert memory.recall_request(request).ids == [wanted]
    assert memory.count() == 2
    assert memory.recall("dark mode", user_id="erin").ids == []
    # agent and run too, and a batch given one owner or one per item
    done = memory.remember_many(
        [{"content": "Prefers tea"}, {"content": "Prefers coffee", "run_id": "r2"}],
        user_id="carol",
        agent_id="helper",
    )
    assert [dict(d.metadata) for d in done] == [
        {"user_id": "carol", "agent_id": "helper"},
        {"user_id": "carol", "agent_id": "helper", "run_id": "r2"},
    ]
    assert [r.id for r in memory.list(agent_id="helper", run_id="r2")] == [done[1].id]


def test_an_owner_given_two_ways_must_agree(memory: Memory) -> None:
    with pytest.raises(InvalidInput) as caught:
        memory.remember("x", user_id="alice", metadata={"user_id": "bob"})
    assert caught.value.field == "user_id"
    with pytest.raises(InvalidInput) as caught:
        memory.recall("x", user_id="alice", metadata={"user_id": ["alice", "bob"]})
    assert caught.value.field == "user_id"
    with pytest.raises(InvalidInput):  # 1 and "1" are two users
        memory.remember("x", user_id="1", metadata={"user_id": 1})
    with pytest.raises(InvalidInput) as caught:  # not a scope key of this store
        memory.remember("x", scope={"tenant": "acme"})
    assert caught.value.field == "scope" and "tenant" in str(caught.value)
    for bad in ("", " ", ["a"], {"a": 1}):
        with pytest.raises(InvalidInput):
            memory.list(user_id=bad)  # type: ignore[arg-type]
    assert memory.count() == 0
    # agreeing is fine
    done = memory.remember("x", user_id="alice", metadata={"user_id": "alice"})
    assert dict(done.metadata) == {"user_id": "alice"}


def test_the_stores_other_scope_keys_by_scope(store_at: dict[str, Any]) -> None:
    keys = Settings(embedder="fake", scope_keys=("tenant", "user_id"))
    with Memory(**store_at, settings=keys) as memory:
        one = memory.remember("Quarterly report due", scope={"tenant": "acme"}, user_id="al")
        two = memory.remember("Quarterly report due", scope={"tenant": "zeta"}, user_id="al")
        assert one.id != two.id
        assert memory.recall("report", scope={"tenant": "zeta"}).ids == [two.id]
        assert memory.forget(scope={"tenant": "acme"}) == [one.id]
        assert memory.count() == 1


def test_async_memory_takes_the_owner_too(store_at: dict[str, Any]) -> None:
    async def run() -> None:
        async with await AsyncMemory.open(**store_at, settings=FAKE) as memory:
            mine = await memory.remember("Allergic to cats", user_id="u1")
            await memory.remember("Allergic to cats", user_id="u2")
            assert (await memory.recall("cats", user_id="u1")).ids == [mine.id]
            assert await memory.forget(user_id="u2", dry_run=True) != []
            assert (await memory.history(mine.id)).current.id == mine.id

    asyncio.run(run())


# -- conversations that belong to someone -----------------------------------------------------


def test_a_conversation_belongs_to_its_user(memory: Memory) -> None:
    alice = memory.remember_conversation(CHAT, user_id="alice", metadata={"channel": "web"})
    bob = memory.remember_conversation(CHAT, user_id="bob")
    assert all(d.created for d in alice) and all(d.created for d in bob)
    assert not _ids(alice) & _ids(bob)
    for done in alice:
        assert done.metadata["user_id"] == "alice" and done.metadata["channel"] == "web"
        assert done.metadata["role"] in ("user", "assistant")
    assert all(d.metadata["user_id"] == "bob" and "channel" not in d.metadata for d in bob)
    again = memory.remember_conversation(CHAT, user_id="bob")
    assert [d.id for d in again] == [d.id for d in bob] and not any(d.created for d in again)
    # alice forgetting hers leaves bob's acknowledged messages as they were
    assert sorted(memory.forget(user_id="alice")) == sorted(_ids(alice))
    assert _ids(memory.get_many([d.id for d in bob])) == _ids(bob)
    assert set(memory.recall("Where do I live?", user_id="bob").ids) & _ids(bob)
    assert memory.recall("Where do I live?", user_id="alice").ids == []


def test_a_conversations_metadata_may_not_take_its_own_keys(memory: Memory) -> None:
    for key in ("role", "session", "message"):
        with pytest.raises(InvalidInput) as caught:
            memory.remember_conversation(CHAT, metadata={key: "x"})
        assert caught.value.field == "metadata"
    with pytest.raises(InvalidInput):
        memory.remember_conversation(CHAT, user_id="a", metadata={"user_id": "b"})
    assert memory.count() == 0


# -- forgetting a user ------------------------------------------------------------------------


def _held_keys(memory: Memory, keys: set[int]) -> dict[str, int]:
    """How many rows of each index still name one of ``keys``."""
    found = {}
    tables = dict(KEY_COLUMNS)
    if memory.store.kind == "sqlite":
        tables["memory_tags"] = ("key",)
    for table, columns in tables.items():
        for column in columns:
            rows = memory.store.select(f"SELECT {column} FROM {table}")  # type: ignore[attr-defined]
            held = sum(1 for (key,) in rows if key in keys)
            if held:
                found[f"{table}.{column}"] = held
    return found


def test_forgetting_a_user_leaves_nothing_of_them(store_at: dict[str, Any]) -> None:
    with Memory(**store_at, settings=FAKE) as memory, Memory(**store_at, settings=FAKE) as other:
        memory.remember_conversation(CHAT, user_id="alice", session="s1")
        memory.remember("Alice's sister Maria lives in Lisbon", user_id="alice", tags=["family"])
        memory.remember("Alice moved to Lisbon", user_id="alice")
        bob = memory.remember_conversation(CHAT, user_id="bob", session="s1")
        kept = memory.remember("Bob's sister lives in Faro", user_id="bob")
        assert other.recall("Porto nurse", user_id="alice").ids  # the other handle reads it
        alice = memory.list(100, user_id="alice")
        keys = {r.key for r in alice}
        assert len(alice) == 5 and _held_keys(memory, keys)

        counted = memory.forget(user_id="alice", dry_run=True)
        assert sorted(counted) == sorted(r.id for r in alice)
        assert memory.count(user_id="alice") == 5  # a dry run removes nothing
        assert sorted(memory.forget(user_id="alice")) == sorted(counted)

        assert memory.count(user_id="alice") == 0 and memory.list(user_id="alice") == []
        assert _held_keys(memory, keys) == {}
        for handle in (memory, other):  # the other handle follows the change feed
            for question in ("Where does Alice live?", "Porto nurse", "sister Lisbon", "Rex"):
                assert not set(handle.recall(question, k=50).ids) & _ids(alice)
                found = handle.recall(question, k=50, include_superseded=True)
                assert not set(found.ids) & _ids(alice)
        exported = io.StringIO()
        export_jsonl(memory, exported)
        assert not {json.loads(line).get("id") for line in exported.getvalue().splitlines()} & (
            _ids(alice)
        )
        assert _ids(memory.list(100)) == _ids(bob) | {kept.id}
        assert memory.forget(user_id="alice") == []


def test_forget_refuses_an_empty_filter_unless_asked_for_everything(memory: Memory) -> None:
    stored = memory.remember_many([{"content": f"note {i}"} for i in range(3)])
    for call in (
        lambda: memory.forget(),
        lambda: memory.forget(metadata={}),
        lambda: memory.forget([stored[0].id], user_id="alice"),
        lambda: memory.forget([stored[0].id], all=True),
        lambda: memory.forget(user_id="alice", all=True),
    ):
        with pytest.raises(InvalidInput):
            call()
    assert memory.count() == 3
    assert sorted(memory.forget(all=True, dry_run=True)) == sorted(d.id for d in stored)
    assert memory.count() == 3
    assert sorted(memory.forget(all=True)) == sorted(d.id for d in stored)
    assert memory.count() == 0


def test_forget_by_metadata_filter(memory: Memory) -> None:
    one = memory.remember("Standup at nine", metadata={"team": "core", "user_id": "a"})
    memory.remember("Standup at ten", metadata={"team": "web", "user_id": "a"})
    assert memory.forget(metadata={"team": "core"}) == [one.id]
    assert memory.count() == 1


def test_forgetting_an_unknown_id_is_not_found_and_forgets_nothing(memory: Memory) -> None:
    """Decided (issue 61): as REST's 404 and the command's exit status 1, the library
    raises NotFound naming the unknown id, and forgets none of the ids given; with
    ``missing_ok`` it forgets those it holds and says which."""
    held = memory.remember("Kept")
    with pytest.raises(NotFound, match="0123456789abcdef"):
        memory.forget([held.id, "0123456789abcdef"])
    assert memory.get(held.id).id == held.id
    assert memory.forget([held.id, "0123456789abcdef"], missing_ok=True) == [held.id]
    assert memory.count() == 0


# -- history ----------------------------------------------------------------------------------


def test_history_follows_an_update_chain_both_ways(memory: Memory) -> None:
    first = memory.remember("I live in Porto", user_id="alice", event_time="2024-01-05T10:00:00Z")
    second = memory.update(first.id, "I live in Lisbon", event_time="2024-06-01T10:00:00Z")
    third = memory.update(second.id, "I live in Faro", event_time="2025-02-01T10:00:00Z")
    # the old id is one call from its successor
    assert memory.get(first.id).superseded_by == second.id
    for held in (first, second, third):
        told = memory.history(held.id)
        assert [r.id for r in told.chain] == [first.id, second.id, third.id]
        assert told.current.id == third.id
    middle = memory.history(second.id)
    assert [(ln.older.id, ln.kind) for ln in middle.replaced] == [(first.id, "stated")]
    assert [(ln.newer.id, ln.kind) for ln in middle.replaced_by] == [(third.id, "stated")]
    assert middle.replaced[0].at == "2024-06-01T10:00:00Z"
    body = middle.to_dict()
    assert body["current"] == third.id and body["replaced"][0]["older"]["content"] == (
        "I live in Porto"
    )
    with pytest.raises(NotFound):
        memory.history("0123456789abcdef")


def test_history_shows_a_probable_update(memory: Memory) -> None:
    old = memory.remember("Ana lives in Porto.", event_time="2024-01-05T10:00:00Z")
    new = memory.remember("Ana lives in Lisbon.", event_time="2024-06-01T10:00:00Z")
    told = memory.history(old.id)
    assert [(ln.newer.id, ln.kind) for ln in told.replaced_by] == [(new.id, "probable")]
    assert told.replaced_by[0].evidence
    assert told.current.id == old.id  # nothing stated: it still holds
    assert [(ln.older.id, ln.kind) for ln in memory.history(new.id).replaced] == [
        (old.id, "probable")
    ]
