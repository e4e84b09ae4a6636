"""Scopes: who a memory belongs to within a profile (docs/scopes.md). The same text for two
users is two memories; nothing one user stores links to, replaces or outranks another's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from slm import Memory, Settings
from slm.embed.base import embed
from slm.embed.minilm import MiniLMEmbedder
from slm.errors import ConfigError, InvalidInput
from slm.models import SCOPE_KEYS, content_hash, scope_of

OLD_STORE = Path(__file__).parent / "data" / "store-0.5.0.sqlite"


def _user(user: str) -> dict[str, str]:
    return {"user_id": user}


def test_a_scope_is_the_metadata_under_the_scope_keys() -> None:
    assert scope_of({"user_id": "u1", "session": 3}, SCOPE_KEYS) == '{"user_id":"u1"}'
    assert scope_of({"session": 3}, SCOPE_KEYS) == ""
    assert scope_of({"lg_ns.0": "users", "lg_ns.1": "a", "lg_key": "k"}, SCOPE_KEYS) == (
        '{"lg_ns.0":"users","lg_ns.1":"a"}'
    )
    # a value's type is part of it: true, 1 and "1" are three users
    assert len({scope_of({"user_id": v}, SCOPE_KEYS) for v in (True, 1, "1")}) == 3
    assert scope_of({"user_id": "u1"}, ()) == ""
    # an unscoped memory hashes its text alone, as every release before scopes did
    assert content_hash("x") == content_hash("x", "") != content_hash("x", '{"user_id":"u1"}')


def test_the_same_text_for_two_users_is_two_memories(memory: Memory) -> None:
    first = memory.remember("I prefer dark mode", metadata=_user("u1"))
    second = memory.remember("I prefer dark mode", metadata=_user("u2"))
    again = memory.remember("I prefer dark mode", metadata={"user_id": "u1", "session": 4})
    assert first.created and second.created and not again.created
    assert first.id != second.id and again.id == first.id
    assert memory.count() == 2
    for user, wanted in (("u1", first.id), ("u2", second.id)):
        found = memory.recall("dark mode", metadata=_user(user))
        assert [r.id for r in found.results] == [wanted]
        assert [r.id for r in memory.list(metadata=_user(user))] == [wanted]
    # in one batch too
    done = memory.remember_many(
        [{"content": "I like tea", "metadata": _user(u)} for u in ("u1", "u2", "u1")]
    )
    assert [d.created for d in done] == [True, True, False]
    assert done[0].id == done[2].id != done[1].id


def test_a_memory_replaces_only_memories_of_its_own_scope(memory: Memory) -> None:
    mine = memory.remember("I live in Porto", metadata=_user("u1"))
    with pytest.raises(InvalidInput, match="another scope") as caught:
        memory.remember("I live in Lisbon", metadata=_user("u2"), supersedes=[mine.id])
    assert caught.value.field == "supersedes"
    with pytest.raises(InvalidInput, match="another scope"):
        memory.update(mine.id, "I live in Lisbon", metadata=_user("u2"))
    assert memory.count() == 1 and memory.get(mine.id).superseded_by is None
    newer = memory.update(mine.id, "I live in Lisbon")  # keeps u1's metadata
    assert newer.replaced == (mine.id,) and newer.metadata["user_id"] == "u1"


def _edges_cross(memory: Memory) -> list[tuple[str, str]]:
    """Pairs of memories of different scopes joined by a graph edge or a probable update."""
    records = {r.key: r for r in memory.list(1000)}
    crossing = []
    for key, edges in memory.indexes.edges.edges_from(memory.profile, list(records)).items():
        for other, _, _ in edges:
            if other in records and records[other].scope != records[key].scope:
                crossing.append((records[key].id, records[other].id))
    for update in memory.store.versions.updates(memory.profile, list(records)):
        older, newer = records.get(update.older), records.get(update.newer)
        if older is not None and newer is not None and older.scope != newer.scope:
            crossing.append((older.id, newer.id))
    return crossing


@pytest.mark.parametrize("policy", ["suggest", "auto"])
def test_a_change_stated_by_one_user_never_touches_another(
    store_at: dict[str, Any], minilm: MiniLMEmbedder, policy: str
) -> None:
    settings = Settings(update_policy=policy)
    with Memory(**store_at, embedder=minilm, settings=settings) as memory:
        porto = memory.remember(
            "I live in Porto", metadata=_user("u1"), event_time="2024-01-01T00:00:00Z"
        )
        lisbon = memory.remember(
            "I live in Lisbon now", metadata=_user("u2"), event_time="2024-06-01T00:00:00Z"
        )
        assert lisbon.updates == ()
        assert memory.get(porto.id).superseded_by is None
        moved = memory.remember(
            "I moved to Lisbon", metadata=_user("u1"), event_time="2024-07-01T00:00:00Z"
        )
        assert moved.updates == (porto.id,)  # within one user, the change is still found
        answer = memory.recall("Where do I live?", metadata=_user("u2"), now="2024-08-01")
        assert {r.memory.metadata["user_id"] for r in answer.results} == {"u2"}
        assert _edges_cross(memory) == []


def test_twenty_users_with_overlapping_facts_never_see_each_other(
    store_at: dict[str, Any], minilm: MiniLMEmbedder
) -> None:
    """Interleaved writes and changes of 20 users who say the same things: every recall
    filtered to one user returns only that user's memories, and a current-value question
    answers with that user's current value."""
    cities = ["Porto", "Lisbon", "Oslo", "Berlin", "Madrid"]
    dogs = ["Rex", "Bolt", "Luna", "Max"]
    users = [f"u{i}" for i in range(20)]
    with Memory(**store_at, embedder=minilm, settings=Settings(update_policy="auto")) as memory:
        home: dict[str, str] = {}
        for step, user in enumerate(users):
            day = f"2024-01-{step % 28 + 1:02d}T09:00:00Z"
            done = memory.remember_many(
                [
                    {"content": f"I live in {cities[step % 5]}", "metadata": _user(user),
                     "event_time": day},
                    {"content": f"My dog is {dogs[step % 4]}", "metadata": _user(user),
                     "event_time": day},
                    {"content": "I prefer dark mode", "metadata": _user(user), "event_time": day},
                ]
            )  # fmt: skip
            assert all(d.created for d in done)
            home[user] = done[0].id
        for step, user in enumerate(users[::2]):  # half of them move, some to the same city
            day = f"2024-03-{step + 1:02d}T09:00:00Z"
            moved = memory.update(home[user], f"I moved to {cities[(step + 2) % 5]}",
                                  event_time=day)  # fmt: skip
            home[user] = moved.id
            said = memory.remember(f"We got a new dog called {dogs[step % 4]}",
                                   metadata=_user(user), event_time=day)  # fmt: skip
            assert said.created
        assert memory.count() == 20 * 3 + 10 * 2
        for user in users:
            for question in ("Where do I live?", "What is my dog called?", "dark mode"):
                found = memory.recall(question, metadata=_user(user), now="2024-06-01")
                assert found.results
                assert {r.memory.metadata["user_id"] for r in found.results} == {user}
                if question == "Where do I live?":
                    assert found.results[0].id == home[user]
        assert _edges_cross(memory) == []


def test_scope_keys_are_a_setting_and_a_change_of_them_rescopes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    assert Settings.from_env({"SLM_SCOPE_KEYS": "tenant, user_id,"}).scope_keys == (
        "tenant",
        "user_id",
    )
    assert Settings.from_env({"SLM_SCOPE_KEYS": ""}).scope_keys == ()
    with pytest.raises(ConfigError):
        Settings(scope_keys=("*",))
    fake = Settings(embedder="fake")
    with Memory(path, settings=fake) as memory:
        for tenant in ("a", "b"):
            memory.remember("Standup is at nine", metadata={"tenant": tenant})
        assert memory.count() == 1  # "tenant" is no scope key by default
        memory.remember("Standup is at ten", metadata={"tenant": "a"})
        memory.remember("Standup is at ten", metadata={"tenant": "b", "user_id": "u1"})
    tenants = Settings(embedder="fake", scope_keys=("tenant",))
    with Memory(path, settings=tenants) as memory:  # read again with the new keys
        assert memory.count() == 3
        assert memory.remember("Standup is at nine", metadata={"tenant": "b"}).created
        assert not memory.remember("Standup is at ten", metadata={"tenant": "b"}).created
    # back to no scopes: two memories would become one, so the store is left as it was
    with pytest.raises(ConfigError, match="would be one memory"):
        Memory(path, settings=Settings(embedder="fake", scope_keys=()))
    with Memory(path, settings=tenants) as memory:
        assert memory.count() == 4
        assert json.loads(memory.store.meta("scope keys") or "") == ["tenant"]


def test_a_memory_left_open_follows_scope_keys_changed_by_another(
    store_at: dict[str, Any],
) -> None:
    """A ``Memory`` open while another one (another process) changes the store's scope keys
    writes with the keys the stored scopes follow, not those it opened with."""
    with Memory(**store_at, settings=Settings(embedder="fake")) as left_open:
        nine = left_open.remember("Standup is at nine", metadata={"tenant": "a"})
        with Memory(**store_at, settings=Settings(embedder="fake", scope_keys=("tenant",))):
            pass  # opened elsewhere with other keys: every scope read again
        # the same text in the same tenant is the stored memory, not a second one
        again = left_open.remember("Standup is at nine", metadata={"tenant": "a"})
        assert not again.created and again.id == nine.id
        # another tenant's text is its own, and nothing of it replaces tenant a's
        other = left_open.remember("Standup is at nine", metadata={"tenant": "b"})
        assert other.created
        moved = left_open.remember("Standup moved to ten", metadata={"tenant": "b"})
        assert nine.id not in moved.updates
        with pytest.raises(InvalidInput, match="another scope"):
            left_open.remember("Standup is at ten", metadata={"tenant": "b"}, supersedes=[nine.id])
        assert left_open.scope_keys() == ("tenant",)
        assert left_open.count() == 3


def _same_memories(before: list[Any], memory: Memory) -> None:
    after = {r.id: r for r in memory.list(1000)}
    assert sorted(after) == sorted(r.id for r in before)
    for record in before:
        assert after[record.id] == record


def test_a_store_of_release_0_5_0_is_migrated_and_keeps_every_memory(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(OLD_STORE, path)
    fake = Settings(embedder="fake")
    with Memory(path, settings=fake) as memory:
        records = memory.list(1000)
        assert len(records) == 8
        by_text = {r.content: r for r in records}
        assert by_text["I live in Porto"].scope == '{"user_id":"u1"}'
        assert by_text["Deploys happen on Thursdays"].scope == ""
        assert by_text["Maya lives in Porto."].scope == '{"lg_ns.0":"users","lg_ns.1":"maya"}'
        old = by_text["I prefer dark mode"]
        assert old.superseded_by == by_text["I prefer light mode now"].id
        assert not memory.remember("I live in Porto", metadata=_user("u1")).created
        assert memory.remember("I live in Porto", metadata=_user("u2")).created
        assert not memory.remember("Deploys happen on Thursdays").created
        found = memory.recall("live in Porto", metadata=_user("u1"))
        assert [r.id for r in found.results] == [by_text["I live in Porto"].id]
    with Memory(path, profile="work", settings=fake) as memory:
        assert memory.count() == 1
    with Memory(path, settings=fake) as memory:  # opened again: nothing more to do
        assert memory.count() == 9


def test_a_postgres_store_without_scopes_is_migrated(postgres_dsn: str) -> None:
    """The PostgreSQL store as release 0.5.0 left it: no scope column, content hashed alone."""
    import psycopg

    fake = Settings(embedder="fake")
    with Memory(dsn=postgres_dsn, settings=fake) as memory:
        memory.remember("I live in Porto", metadata=_user("u1"))
        memory.remember("I live in Oslo", metadata=_user("u2"))
        memory.remember("Deploys happen on Thursdays")
        before = memory.list(1000)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP INDEX memories_scope")
        conn.execute("ALTER TABLE memories DROP COLUMN scope")
        for id_, content in conn.execute("SELECT id, content FROM memories").fetchall():
            conn.execute(
                "UPDATE memories SET content_hash = %s WHERE id = %s", (content_hash(content), id_)
            )
        conn.execute("DROP TABLE changes")  # migration 12, after the scopes
        conn.execute("DROP TABLE unfinished")  # migration 13
        conn.execute("DELETE FROM slm_schema WHERE version >= 11")
        conn.execute("DELETE FROM slm_meta WHERE key = 'scope keys'")
    with Memory(dsn=postgres_dsn, settings=fake) as memory:
        _same_memories(before, memory)
        assert {r.scope for r in memory.list(10)} == {"", '{"user_id":"u1"}', '{"user_id":"u2"}'}
        assert memory.remember("I live in Porto", metadata=_user("u2")).created
        assert not memory.remember("I live in Porto", metadata=_user("u1")).created


def test_the_langgraph_store_keeps_the_same_text_under_two_namespaces(memory: Memory) -> None:
    pytest.importorskip("langgraph")
    from langgraph.store.memory import InMemoryStore

    from slm.integrations.langgraph import SlmStore

    for store in (InMemoryStore(), SlmStore(memory)):
        store.put(("users", "a"), "pref", {"text": "likes tea"})
        store.put(("users", "b"), "pref", {"text": "likes tea"})
        assert store.get(("users", "a"), "pref").value == {"text": "likes tea"}
        assert store.get(("users", "b"), "pref").value == {"text": "likes tea"}
    # the same text under a second key of one namespace is refused, and loses nothing
    store = SlmStore(memory)
    store.put(("users", "a"), "drink", {"text": "likes coffee"})
    with pytest.raises(InvalidInput, match="key 'pref' of this namespace") as caught:
        store.put(("users", "a"), "drink", {"text": "likes tea"})
    assert "users" not in str(caught.value)  # it names no other namespace
    assert store.get(("users", "a"), "drink").value == {"text": "likes coffee"}
    # the same text again under its own key, with another value, is a new value
    store.put(("users", "a"), "pref", {"text": "likes tea", "since": 2020})
    assert store.get(("users", "a"), "pref").value == {"text": "likes tea", "since": 2020}
    assert store.get(("users", "b"), "pref").value == {"text": "likes tea"}


def test_a_langgraph_put_for_one_user_never_supersedes_another(
    store_at: dict[str, Any], minilm: MiniLMEmbedder
) -> None:
    pytest.importorskip("langgraph")
    from slm.integrations.langgraph import SlmStore

    settings = Settings(update_policy="auto")
    with Memory(**store_at, embedder=minilm, settings=settings) as memory:
        store = SlmStore(memory)
        store.put(("users", "u1"), "home", {"text": "I live in Porto"})
        store.put(("users", "u2"), "home", {"text": "I moved to Lisbon"})
        found = store.search(("users", "u1"), query="Where do I live?")
        assert [i.value["text"] for i in found] == ["I live in Porto"]


USERS = ("u1", "u2", "u3")
FACTS = [
    "I live in Porto",
    "I moved to Lisbon",
    "My dog is Rex",
    "I prefer dark mode",
    "I like tea",
]


def scope_machine(memory: Memory) -> type[RuleBasedStateMachine]:
    """Random writes, changes and forgets of three users in one profile: each user's model is
    ``{id: text}``; every answer for a user must come from that user's own model."""

    class Scopes(RuleBasedStateMachine):
        ids = Bundle("ids")

        def __init__(self) -> None:
            super().__init__()
            memory.forget([r.id for r in memory.list(10_000)])
            self.model: dict[str, dict[str, str]] = {u: {} for u in USERS}

        @rule(target=ids, user=st.sampled_from(USERS), text=st.sampled_from(FACTS))
        def remember(self, user: str, text: str) -> Any:
            done = memory.remember(text, metadata=_user(user))
            mine = self.model[user]
            assert done.created == (done.id not in mine)
            assert done.created or mine[done.id] == text
            mine[done.id] = text
            return (user, done.id)

        @rule(target=ids, owned=ids, user=st.sampled_from(USERS), text=st.sampled_from(FACTS))
        def replace(self, owned: tuple[str, str], user: str, text: str) -> Any:
            owner, id_ = owned
            if id_ not in self.model[owner]:
                return multiple()
            try:
                done = memory.remember(text, metadata=_user(user), supersedes=[id_])
            except InvalidInput as exc:
                assert owner != user or "supersede" in str(exc)
                return multiple()
            assert owner == user  # another user's memory is never replaced
            self.model[user][done.id] = text
            return (user, done.id)

        @rule(owned=ids)
        def forget(self, owned: tuple[str, str]) -> None:
            owner, id_ = owned
            memory.forget([id_], missing_ok=True)  # perhaps forgotten already
            self.model[owner].pop(id_, None)

        @rule(user=st.sampled_from(USERS), query=st.sampled_from(FACTS))
        def recall(self, user: str, query: str) -> None:
            found = memory.recall(query, metadata=_user(user), include_superseded=True)
            assert set(found.ids) <= set(self.model[user])

        @invariant()
        def each_user_has_exactly_their_own(self) -> None:
            for user, mine in self.model.items():
                listed = {r.id: r.content for r in memory.list(10_000, metadata=_user(user))}
                assert listed == mine
                assert len(set(mine.values())) == len(mine)  # one memory per text and user
            assert _edges_cross(memory) == []

    return Scopes


def test_no_sequence_of_operations_crosses_scopes(store_at: dict[str, Any]) -> None:
    with Memory(**store_at, settings=Settings(embedder="fake", update_policy="auto")) as memory:
        run_state_machine_as_test(
            scope_machine(memory),
            settings=settings(
                max_examples=15,
                stateful_step_count=20,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            ),
        )


# -- channels search a user's own before they take their best ---------------------------------

OTHERS = [f"u{i}" for i in range(6)]


def test_a_users_own_standing_instruction_is_found_however_many_users_have_one(
    real_memory: Memory,
) -> None:
    """The standing channel searches the statements of the recall's scope, not the
    profile's best few filtered afterwards."""
    for user in OTHERS:
        real_memory.remember(
            "user: Always include version numbers when I ask about software dependencies.",
            metadata={"user_id": user},
        )
    mine = real_memory.remember(
        "user: Always say which licence each one has when I ask for tools.",
        metadata={"user_id": "alice"},
    )
    asked = real_memory.recall(
        "Which libraries does this project use?",
        metadata={"user_id": "alice"},
        channels=["standing"],
    )
    assert asked.ids == [mine.id]


def test_a_users_own_passages_are_searched_however_many_users_have_some(
    real_memory: Memory,
) -> None:
    """Passage search looks among the passages of the memories a recall may see."""
    filler = "The quarterly report covers revenue, hiring and the office move. " * 40
    for user in OTHERS:
        real_memory.remember(
            filler + "The garden needs watering every evening in July.", metadata={"user_id": user}
        )
    mine = real_memory.remember(
        filler + "Water the tomato plants twice a week.", metadata={"user_id": "alice"}
    )
    vectors, profile = real_memory.indexes.vectors, real_memory.profile
    query = embed(real_memory.embedder, "How often should the garden be watered?")
    assert vectors.passage_search(profile, query, 1, None)[0][0] != mine.key
    assert [key for key, _ in vectors.passage_search(profile, query, 1, {mine.key})] == [mine.key]
