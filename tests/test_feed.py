"""The change feed (slm.store.feed) and the indexes that follow it (slm.index), on both
stores: every change to what recall reads is one row of the feed, and a recall through
indexes kept current from the feed, by a handle that wrote some of the changes and read
through all of them, equals the same recall by a handle opened afterwards, which builds
everything from the rows; and so do the vectors and edges they hold."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from slm import Memory, Settings
from slm.store.feed import Change

FAKE = Settings(embedder="fake")
NOW = "2026-06-01T00:00:00+00:00"
WORDS = (
    "alice bob carol deploy postgres mysql porto oslo thursday friday coffee tea garden "
    "piano berlin lisbon dentist invoice rust python release budget hiking novel"
).split()
QUESTIONS = [
    "where does alice live now?",
    "when do deploys happen?",
    "what does bob drink?",
    "which database do we use?",
    "carol piano lessons",
    "release budget",
]


def note(rng: random.Random, i: int) -> dict[str, Any]:
    words = rng.sample(WORDS, 5)
    return {
        "content": f"note {i}: {' '.join(words)}",
        "event_time": f"2026-0{1 + i % 5}-1{i % 9}T10:00:00+00:00",
        # sessions, so that turns are linked to the turns before them
        "metadata": {"user_id": rng.choice(["u1", "u2"]), "session": rng.choice("xy")},
    }


def answers(memory: Memory) -> list[list[tuple[str, float]]]:
    """Each question's results as (id, score), scores to 5 places."""
    out = []
    for question in QUESTIONS:
        response = memory.recall(question, k=8, now=NOW)
        out.append([(r.memory.id, round(r.ranking_score, 5)) for r in response.results])
    for user in ("u1", "u2"):
        response = memory.recall("alice", k=8, now=NOW, metadata={"user_id": user})
        out.append([(r.memory.id, round(r.ranking_score, 5)) for r in response.results])
    return out


def test_every_write_of_a_profile_is_one_change(store_at: dict[str, Any]) -> None:
    with Memory(**store_at, settings=FAKE, profile="a") as memory:
        store = memory.store
        first = memory.remember_many([{"content": "alpha one"}, {"content": "beta two"}])
        keys = tuple(r.key for r in first)
        assert store.changes_since("a", 0) == [Change(1, written=keys)]
        newer = memory.update(first[0].id, "alpha three")
        memory.feedback(newer.id, useful=True)  # feedback is not a change of memories
        memory.forget([first[1].id])
        memory.reindex()
        changes = store.changes_since("a", 1)
        assert [c.seq for c in changes] == [2, 3, 4]
        assert changes[0].written == (newer.key,)
        assert changes[1].forgotten == (first[1].key,)
        assert changes[2].rederived and not changes[2].written
        assert store.feed_head("a") == 4 and store.feed_head("b") == 0
        with Memory(**store_at, settings=FAKE, profile="b") as other:
            other.remember("gamma")
            assert store.feed_head("b") == 1 and store.feed_head("a") == 4
        assert store.changes_since("a", 4) == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_recalls_through_followed_indexes_equal_recalls_from_the_rows(
    store_at: dict[str, Any], seed: int
) -> None:
    """Two handles (two connections: as two processes, or two servers) write, update
    (supersede), unlink, forget and reindex at random, each recalling between the changes;
    after every step both answer exactly as a third handle opened then, whose indexes and
    read cache are built from the rows alone, and find the same nearest vectors and the same
    edges."""
    rng = random.Random(seed)
    writers = [Memory(**store_at, settings=FAKE) for _ in range(2)]
    try:
        made = 0
        for step in range(16):
            memory = rng.choice(writers)
            stored = [r.id for r in memory.list(1000) if r.superseded_by is None]
            action = rng.choice(["write", "write", "update", "unlink", "forget", "reindex"])
            replaced = [r for r in memory.list(1000) if r.superseded_by is not None]
            if action == "write" or len(stored) < 4:
                memory.remember_many([note(rng, made + j) for j in range(rng.randint(1, 6))])
                made += 6
            elif action == "update":
                memory.update(rng.choice(stored), note(rng, made)["content"])
                made += 1
            elif action == "unlink" and replaced:
                older = rng.choice(replaced)
                assert older.superseded_by is not None
                memory.unlink(older.id, older.superseded_by)
            elif action == "forget":
                memory.forget(rng.sample(stored, 2))
            else:
                memory.reindex()
            with Memory(**store_at, settings=FAKE) as fresh:
                truth = answers(fresh)
                vectors = fresh.indexes.vectors
                queries = np.asarray(fresh.embedder.embed_batch(QUESTIONS), dtype=np.float32)
                nearest = [vectors.search("default", q, 5, None) for q in queries]
                rows = fresh.store.select("SELECT key FROM memories")  # type: ignore[attr-defined]
                keys = [row[0] for row in rows]
                edges = fresh.indexes.edges.edges_from("default", keys)
            for handle in writers:
                assert answers(handle) == truth, (step, action)
                found = [handle.indexes.vectors.search("default", q, 5, None) for q in queries]
                assert [[k for k, _ in f] for f in found] == [[k for k, _ in n] for n in nearest]
                assert handle.indexes.edges.edges_from("default", keys) == edges, (step, action)
        assert any(kind == "next" for held in edges.values() for _, kind, _ in held)
    finally:
        for memory in writers:
            memory.close()


def test_passages_written_again_are_followed_by_another_handle(store_at: dict[str, Any]) -> None:
    """``slm reindex`` by one handle writes passages again; another handle that searched
    them before reads them again from the feed, not from what it held."""
    long_text = " ".join(f"sentence {i} about the garden and the piano." for i in range(120))
    with (
        Memory(**store_at, settings=FAKE) as first,
        Memory(**store_at, settings=FAKE) as second,
    ):
        stored = first.remember(long_text)
        key = stored.key
        before = second.indexes.vectors.passages("default", [key])
        assert key in before and len(before[key]) >= 1
        first.forget([stored.id])
        assert second.indexes.vectors.passages("default", [key]) == {}
        again = first.remember(long_text)
        first.reindex()
        after = second.indexes.vectors.passages("default", [again.key])
        assert np.allclose(
            after[again.key], first.indexes.vectors.passages("default", [again.key])[again.key]
        )


def test_a_change_of_scope_keys_in_this_process_is_followed(store_at: dict[str, Any]) -> None:
    """Reading the scopes again with other keys drops the links between memories that no
    longer share a scope; a handle whose indexes and read cache were already built sees it
    at once, as a handle opened afterwards does."""
    from store_checks import edge_rows

    with Memory(**store_at, settings=FAKE) as memory:
        memory.remember_many(
            [
                {"content": f"turn {i} about the garden", "metadata": {"team": f"t{i % 2}"}}
                for i in range(8)
            ]
        )
        store = memory.store
        keys = [r.key for r in memory.list(100)]
        before = memory.indexes.edges.edges_from("default", keys)
        memory.recall("garden", now=NOW)
        assert store.rescope(["team"]) > 0
        after = memory.indexes.edges.edges_from("default", keys)
        assert after != before
        assert after == {k: v for k, v in edge_rows(store, "default").items() if k in keys}
        with Memory(**store_at, settings=Settings(embedder="fake", scope_keys=("team",))) as fresh:
            assert answers(memory) == answers(fresh)
