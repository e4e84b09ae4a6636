"""Profiles never see each other, on both stores: a stateful property test over random
sequences of operations, and every store call given another profile's keys and ids."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
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
from reliability_worker import FAKE

from slm import InvalidInput, Memory, NotFound
from slm.engine import content_hash
from slm.store import Filters

PROFILES = ("alice", "bob")
STEPS: Counter[str] = Counter()
TEXTS = [
    "Priya is allergic to cats",
    "Deploys happen on Thursdays",
    "The boiler is serviced every October",
    "Maya moved to Lisbon in May 2023",
    "Sam's locker is 42",
    "alice's secret is the blue door",
    "Caroline met Melanie at the lake yesterday",
]
QUERIES = [*TEXTS, "blue door secret", "When did Maya move?", "lake", "Priya cats"]
texts = st.sampled_from(TEXTS) | st.text(min_size=1, max_size=24)
profiles = st.sampled_from(PROFILES)


def isolation_machine(memories: dict[str, Memory]) -> type[RuleBasedStateMachine]:
    """A machine over open ``memories`` (one per profile, one store): its model is each
    profile's own ``{id: content}``; every answer must come from the caller's own model."""

    class Isolation(RuleBasedStateMachine):
        ids = Bundle("ids")

        def __init__(self) -> None:
            super().__init__()
            for memory in memories.values():
                memory.forget([r.id for r in memory.list(limit=10_000)])
            self.model: dict[str, dict[str, str]] = {p: {} for p in memories}

        @rule(target=ids, profile=profiles, text=texts)
        def remember(self, profile: str, text: str) -> Any:
            try:
                record = memories[profile].remember(text, tags=["t"])
            except InvalidInput:
                return multiple()
            self.model[profile][record.id] = record.content
            return (profile, record.id)

        @rule(target=ids, profile=profiles, batch=st.lists(texts, min_size=1, max_size=4))
        def remember_many(self, profile: str, batch: list[str]) -> Any:
            try:
                records = memories[profile].remember_many([{"content": t} for t in batch])
            except InvalidInput:
                return multiple()
            self.model[profile].update((r.id, r.content) for r in records)
            return multiple(*[(profile, r.id) for r in records])

        @rule(profile=profiles, owned=ids)
        def forget(self, profile: str, owned: tuple[str, str]) -> None:
            _, id_ = owned
            mine = self.model[profile]
            if id_ not in mine:  # another profile's, or forgotten: not found, as get says
                with pytest.raises(NotFound):
                    memories[profile].forget([id_])
            assert memories[profile].forget([id_], missing_ok=True) == (
                [id_] if id_ in mine else []
            )
            mine.pop(id_, None)

        @rule(profile=profiles, owned=ids)
        def get(self, profile: str, owned: tuple[str, str]) -> None:
            _, id_ = owned
            if id_ in self.model[profile]:
                assert memories[profile].get(id_).content == self.model[profile][id_]
            else:
                with pytest.raises(NotFound):
                    memories[profile].get(id_)
                with pytest.raises(NotFound):
                    memories[profile].feedback(id_, useful=False)

        @rule(profile=profiles, query=st.sampled_from(QUERIES), k=st.integers(1, 20))
        def recall(self, profile: str, query: str, k: int) -> None:
            for filters in ({}, {"tags": ["t"]}):
                ids = memories[profile].recall(query, k=k, **filters).ids
                assert set(ids) <= set(self.model[profile])

        @rule(profile=profiles, limit=st.integers(1, 5), offset=st.integers(0, 5))
        def page(self, profile: str, limit: int, offset: int) -> None:
            listed = memories[profile].list(limit, offset)
            assert {r.id for r in listed} <= set(self.model[profile])

        @invariant()
        def each_profile_sees_exactly_its_own(self) -> None:
            STEPS[memories["alice"].store.kind] += 1
            for profile, memory in memories.items():
                mine = self.model[profile]
                assert memory.count() == len(mine)
                assert {r.id: r.content for r in memory.list(limit=10_000)} == mine
                counts = memory.store.index_counts(profile)
                assert counts == dict.fromkeys(counts, len(mine))

    return Isolation


@pytest.fixture
def two_profiles(store_at: dict[str, Any]) -> Iterator[dict[str, Memory]]:
    opened = {p: Memory(**store_at, profile=p, settings=FAKE) for p in PROFILES}
    yield opened
    for memory in opened.values():
        memory.close()


def test_no_sequence_of_operations_crosses_profiles(two_profiles: dict[str, Memory]) -> None:
    kind = two_profiles["alice"].store.kind
    before = STEPS[kind]
    run_state_machine_as_test(
        isolation_machine(two_profiles),
        settings=settings(
            max_examples=25,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
    print(f"\nisolation ({kind}): {STEPS[kind] - before} checked states")


CORPUS = [
    "Caroline went to the LGBTQ support group yesterday and felt accepted",
    "Melanie is painting a lake sunrise for the kids' room",
    "Caroline is researching adoption agencies; adoption is a big step",
    "Melanie took the kids camping at the lake last summer",
    "Caroline: the painting of the lake is beautiful, Melanie",
]


def test_no_store_call_crosses_profiles(store_at: dict[str, Any]) -> None:
    """Bob's store calls, given Alice's keys, ids, entities and terms, return nothing."""
    with (
        Memory(**store_at, profile="alice", settings=FAKE) as alice,
        Memory(**store_at, profile="bob", settings=FAKE) as bob,
    ):
        theirs = alice.remember_many(
            [{"content": t, "event_time": "2023-05-08", "metadata": {"session": 1}} for t in CORPUS]
        )
        alice.feedback(theirs[0].id, useful=True)
        mine = bob.remember("Bob keeps bees near the lake", event_time="2023-05-08")
        store, keys, me = bob.store, [r.key for r in theirs], "bob"
        found = alice.store.find_entities("alice", ["caroline", "melanie"])
        entity_ids = [entity for matches in found.values() for entity, _, _ in matches]
        assert entity_ids and alice.indexes.edges.edges_from("alice", keys)
        assert alice.store.memory_entities("alice", keys)
        assert alice.store.referenced_times("alice", keys)
        assert store.get(me, [r.id for r in theirs]) == []
        assert store.get_by_keys(me, keys) == {}
        assert store.existing(me, [content_hash(t) for t in CORPUS]) == {}
        assert set(store.postings(me, ["lake", "caroline", "painting"], 100)) == {"lake"}
        assert store.postings(me, ["lake"], 100)["lake"].keys.tolist() == [mine.key]
        assert store.lexical_stats(me, ["lake", "caroline"]).n_docs == 1
        assert store.find_entities(me, ["caroline", "melanie"]) == {}
        assert store.entity_members(me, entity_ids, 100) in ({}, {e: () for e in entity_ids})
        assert store.memory_entities(me, keys) == {}
        assert bob.indexes.edges.edges_from(me, keys) == {}
        assert store.referenced_times(me, keys) == {}
        assert store.event_times(me, keys) == {}
        assert not bob.indexes.vectors.get(me, keys).any()
        assert set(store.time_overlaps(me, 0, 2**62, 10_000)) == {mine.key}
        query = alice.embedder.embed_batch([CORPUS[0]])[0]
        assert [k for k, _ in bob.indexes.vectors.search(me, query, 50, None)] == [mine.key]
        assert bob.indexes.vectors.search(me, np.asarray(query), 50, set(keys)) == []
        assert store.allowed_keys(me, Filters()) == {mine.key}
        assert store.count(me) == 1 and store.index_counts(me)["lexical"] == 1
        assert [r.id for r in store.page(me, 100, 0, Filters())] == [mine.id]
        assert [r.id for r in store.scan(me, 0, 100)] == [mine.id]
        assert store.feedback.trust(me, [""]) == {}
        assert store.delete(me, [r.id for r in theirs]) == []
        assert bob.reindex() == 1
        assert alice.count() == len(CORPUS) and alice.health()["memories"] == len(CORPUS)
        assert store.profiles() == ["alice", "bob"]
