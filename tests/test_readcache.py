"""The SQLite store keeps what recalls read of each memory between recalls
(slm.store.readcache): recall through it returns exactly what recall through SQL returns,
after any sequence of writes, updates, unlinks and forgets, by this process or another."""

from __future__ import annotations

import contextlib
import random
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from store_checks import edge_rows

from slm import Memory, Settings
from slm.errors import InvalidInput
from slm.store.readcache import ReadCache

WORDS = (
    "boiler garden Lisbon Porto violin marathon sister dentist invoice Tuesday May "
    "Ana Ben moved switched started trained painted bought visited 2021 2023 three"
).split()
SPEAKERS = ("Ana", "Ben", None)


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9)))


def _seen(memory: Memory, question: str) -> list[dict[str, Any]]:
    """Each result whole (the memory, its validity, its scores, its probable updates)."""
    response = memory.recall(question, k=8)
    return [{**r.to_dict(), "channels": dict(r.channels)} for r in response.results]


def _through_sql(memory: Memory, question: str) -> list[dict[str, Any]]:
    kept = memory.store.cache  # type: ignore[attr-defined]
    memory.store.cache = ReadCache(None)  # type: ignore[attr-defined]
    try:
        return _seen(memory, question)
    finally:
        memory.store.cache = kept  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_recall_through_the_cache_equals_recall_through_sql(
    store_at: dict[str, Any], seed: int
) -> None:
    rng = random.Random(seed)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with Memory(**store_at, settings=Settings(embedder="fake")) as memory:
        assert isinstance(memory.store.cache, ReadCache)  # type: ignore[attr-defined]
        ids: list[str] = []
        for step in range(60):
            roll = rng.random()
            when = start + timedelta(days=step)
            if roll < 0.45 or len(ids) < 3:
                done = memory.remember(_sentence(rng), event_time=when, source=rng.choice(SPEAKERS))
                ids.append(done.id)
            elif roll < 0.55:
                current = [i for i in ids if memory.get(i).superseded_by is None]
                # refused when it is the same text again
                with contextlib.suppress(InvalidInput):
                    ids.append(memory.update(rng.choice(current), _sentence(rng)).id)
            elif roll < 0.65:
                gone = ids.pop(rng.randrange(len(ids)))
                memory.forget(gone)
            elif roll < 0.7:
                for record in memory.list(limit=50):
                    if record.superseded_by:
                        memory.unlink(record.id, record.superseded_by)
                        break
            else:
                question = _sentence(rng) + "?"
                cached = _seen(memory, question)
                assert cached == _through_sql(memory, question), f"step {step}: {question}"
                assert _seen(memory, question) == cached


def test_another_connection_s_writes_are_seen_at_once(tmp_path: Path) -> None:
    settings = Settings(embedder="fake")
    path = tmp_path / "m.db"
    with Memory(path, settings=settings) as mine, Memory(path, settings=settings) as theirs:
        first = mine.remember("the boiler is serviced in May")
        assert [r.memory.id for r in mine.recall("boiler serviced").results] == [first.id]
        newer = theirs.update(first.id, "the boiler is serviced in June")
        seen = {r.memory.id: r for r in mine.recall("boiler serviced").results}
        assert seen[newer.id].memory.content == "the boiler is serviced in June"
        assert first.id not in seen or seen[first.id].memory.superseded_by == newer.id
        theirs.forget([newer.id])
        assert newer.id not in {r.memory.id for r in mine.recall("boiler serviced").results}
        assert _seen(mine, "boiler June") == _through_sql(mine, "boiler June")


def test_postings_are_kept_by_term_in_the_order_asked_and_bounded(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", settings=Settings(embedder="fake")) as memory:
        memory.remember_many(
            [{"content": "the boiler in the garden"}, {"content": "a violin in the garden"}]
        )
        store: Any = memory.store
        first = store.postings(memory.profile, ["violin", "garden", "absent"], 500)
        assert list(first) == ["violin", "garden"]  # as asked, not sorted
        again = store.postings(memory.profile, ["garden", "violin"], 500)
        assert list(again) == ["garden", "violin"] and again["garden"] is first["garden"]
        assert len(store.cache._kinds["postings/500"]) == 3  # "absent" is kept as absent
        memory.remember("the garden again")
        assert len(store.postings(memory.profile, ["garden"], 500)["garden"].keys) == 3
    small = ReadCache(lambda _: 0)
    for term in ("a", "b", "c"):
        small.keyed("postings", "p", [term], lambda missing: {t: t for t in missing}, limit=2)
    assert list(small._kinds["postings"]) == [("p", "b"), ("p", "c")]


def test_kept_records_cannot_be_changed_in_place(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", settings=Settings(embedder="fake")) as memory:
        memory.remember("the boiler is serviced in May", metadata={"room": "cellar"})
        (result,) = memory.recall("boiler").results
        with pytest.raises(TypeError):
            result.memory.metadata["room"] = "attic"  # type: ignore[index]
        assert memory.recall("boiler").results[0].memory.metadata == {"room": "cellar"}
        assert result.to_dict()["metadata"] == {"room": "cellar"}


def test_the_cache_is_bounded_and_follows_its_version() -> None:
    version = [0]
    cache = ReadCache(lambda _: version[0], limit=3)
    fetched: list[list[int]] = []

    def fetch(keys: list[int]) -> dict[int, Any]:
        fetched.append(keys)
        return {k: f"row {k}" for k in keys if k != 2}

    assert cache.keyed("rows", "p", [1, 2, 3], fetch) == {1: "row 1", 3: "row 3"}
    assert cache.keyed("rows", "p", [3, 2, 1], fetch) == {1: "row 1", 3: "row 3"}
    assert fetched == [[1, 2, 3]]  # a key without a row is kept as such
    cache.keyed("rows", "p", [4, 5], fetch)
    assert cache.keyed("rows", "p", [5], fetch) == {5: "row 5"}
    assert fetched[-1] == [4, 5]  # 5 is among the newest 3
    cache.keyed("rows", "p", [1], fetch)
    assert fetched[-1] == [1]  # 1 was among the oldest and left
    assert cache.keyed("rows", "q", [1], fetch) == {1: "row 1"}
    assert fetched[-1] == [1]  # profiles are kept apart
    version[0] += 1
    cache.keyed("rows", "q", [1], fetch)
    assert fetched[-1] == [1]  # another connection committed: read again
    cache.clear()
    cache.keyed("rows", "q", [1], fetch)
    assert len(fetched) == 6


def test_a_pinned_thread_checks_the_version_once_and_others_still_follow_it() -> None:
    version, checks = [0], [0]

    def current(_: str) -> int:
        checks[0] += 1
        return version[0]

    cache = ReadCache(current)
    rows = {1: "old"}
    with cache.pinned("p"):
        assert cache.keyed("rows", "p", [1], lambda keys: dict(rows)) == {1: "old"}
        version[0] += 1  # another connection commits during the recall
        rows[1] = "new"
        assert cache.keyed("rows", "p", [1], lambda keys: dict(rows)) == {1: "old"}
        with cache.pinned("p"):  # nested: still the one check
            cache.keyed("rows", "p", [1], lambda keys: dict(rows))
        seen: dict[int, Any] = {}
        other = threading.Thread(
            target=lambda: seen.update(cache.keyed("rows", "p", [1], lambda keys: dict(rows)))
        )
        other.start()
        other.join(10)
        assert seen == {1: "new"}  # a thread not inside follows the version
    assert checks[0] == 2  # this recall's one check, and the other thread's
    assert cache.keyed("rows", "p", [1], lambda keys: dict(rows)) == {1: "new"}


def test_a_fetch_that_overlapped_a_write_is_not_kept() -> None:
    cache = ReadCache(lambda _: 0)

    def fetch_during_a_write(keys: list[int]) -> dict[int, Any]:
        cache.clear()  # this process committed while the rows were being read
        return {k: "read before the commit" for k in keys}

    assert cache.keyed("rows", "p", [1], fetch_during_a_write) == {1: "read before the commit"}
    assert cache.keyed("rows", "p", [1], lambda keys: {1: "fresh"}) == {1: "fresh"}


def test_probable_and_explicit_updates_through_the_cache_equal_sql(tmp_path: Path) -> None:
    rng = random.Random(7)
    cities = ("Porto", "Lisbon", "Berlin", "Madrid", "Rome")
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with Memory(tmp_path / "m.db", settings=Settings(embedder="fake")) as memory:
        versions, profile = memory.store.versions, memory.profile
        for step in range(40):
            when = start + timedelta(days=step)
            records = memory.list(limit=100)
            roll = rng.random()
            if roll < 0.5 or len(records) < 3:
                person = rng.choice(("Ana", "Ben"))
                memory.remember(f"{person} moved to {rng.choice(cities)}.", event_time=when)
            elif roll < 0.65:
                older = rng.choice([r for r in records if r.superseded_by is None])
                with contextlib.suppress(InvalidInput):
                    memory.update(older.id, f"Ana lives in {rng.choice(cities)}.")
            elif roll < 0.8:
                pairs = versions.updates(profile, [r.key for r in records])
                if pairs:
                    pair = rng.choice(pairs)
                    memory.unlink(pair.older_id, pair.newer_id)
            elif roll < 0.9:
                memory.forget(rng.choice(records).id)
            keys = [r.key for r in memory.list(limit=100)]
            asked = rng.sample(keys, k=min(len(keys), rng.randint(1, 6)))
            cached = versions.updates(profile, asked)
            kept = memory.store.cache  # type: ignore[attr-defined]
            memory.store.cache = ReadCache(None)  # type: ignore[attr-defined]
            try:
                assert cached == versions.updates(profile, asked), f"step {step}"
            finally:
                memory.store.cache = kept  # type: ignore[attr-defined]
        assert versions.update_count(profile) > 3  # probable updates were read, not only none


def _every_read(memory: Memory) -> dict[str, Any]:
    """What the read cache keeps, for every memory and entity of the profile."""
    store: Any = memory.store
    profile = memory.profile
    keys = [r.key for r in memory.list(limit=500)]
    entities = [row[0] for row in store.select("SELECT id FROM entities ORDER BY id")]
    return {
        "records": store.get_by_keys(profile, keys),
        "entities": store.memory_entities(profile, keys),
        # edges are read from the edge arrays (tests/test_edge_arrays.py), not the cache:
        # through no cache, they are compared with their rows
        "edges": memory.indexes.edges.edges_from(profile, keys)
        if store.cache._version is not None
        else {k: v for k, v in edge_rows(store, profile).items() if k in set(keys)},
        "times": store.referenced_times(profile, keys),
        "event_times": store.event_times(profile, keys),
        "terms": store.doc_terms(profile, keys),
        "members": store.entity_members(profile, entities, 500),
        "updates": store.versions.updates(profile, keys),
        "versions": store.versions.exist(profile),
        # what recall reads of the lexical index, by term
        "postings": {
            term: (p.keys.tolist(), p.tf.tolist(), p.dl.tolist())
            for term, p in store.postings(profile, [*WORDS, "absent"], 500).items()
        },
        "stats": store.lexical_stats(profile, [*WORDS, "absent"]),
    }


@pytest.mark.parametrize(("seed", "policy"), [(4, "suggest"), (5, "auto"), (6, "suggest")])
def test_what_storing_new_memories_spares_in_the_cache_equals_sql(
    tmp_path: Path, seed: int, policy: str
) -> None:
    """Storing memories keeps most of the cache (readcache.Kept): after every kind of
    store (turns that become neighbours, near repeats that link, batches, replacements,
    moves that read as updates), everything read through the warm cache equals SQL."""
    rng = random.Random(seed)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    settings = Settings(embedder="fake", update_policy=policy)
    with Memory(tmp_path / "m.db", settings=settings) as memory:
        ids: list[str] = []
        for step in range(45):
            when = start + timedelta(days=step)
            roll = rng.random()
            if roll < 0.3 or len(ids) < 3:
                said = memory.remember(_sentence(rng), event_time=when, source=rng.choice(SPEAKERS))
                ids.append(said.id)
            elif roll < 0.45:  # a near repeat of an earlier memory: a similar edge to it
                earlier = memory.get(rng.choice(ids)).content
                ids.append(memory.remember(earlier + " " + rng.choice(WORDS), event_time=when).id)
            elif roll < 0.6:
                batch = [
                    {"content": _sentence(rng), "event_time": when, "source": rng.choice(SPEAKERS)}
                    for _ in range(rng.randint(2, 4))
                ]
                ids += [done.id for done in memory.remember_many(batch)]
            elif roll < 0.75:
                older = rng.choice([i for i in ids if memory.get(i).superseded_by is None])
                with contextlib.suppress(InvalidInput):  # when it started later (an update)
                    said = memory.remember(_sentence(rng), supersedes=[older], event_time=when)
                    ids.append(said.id)
            elif roll < 0.9:
                person = rng.choice(("Ana", "Ben"))
                city = rng.choice(("Porto", "Lisbon", "Berlin"))
                ids.append(memory.remember(f"{person} moved to {city}.", event_time=when).id)
            else:
                current = [i for i in ids if memory.get(i).superseded_by is None]
                with contextlib.suppress(InvalidInput):
                    ids.append(memory.update(rng.choice(current), _sentence(rng)).id)
            cached = _every_read(memory)  # through what the write left, then warm again
            kept = memory.store.cache  # type: ignore[attr-defined]
            memory.store.cache = ReadCache(None)  # type: ignore[attr-defined]
            try:
                assert cached == _every_read(memory), f"step {step}"
            finally:
                memory.store.cache = kept  # type: ignore[attr-defined]
        store: Any = memory.store
        assert cached["edges"], "memories with edges were read"
        counts = store.select("SELECT kind, count(*) FROM edges GROUP BY kind")
        assert {kind for kind, _ in counts} >= {"next", "prev", "similar"}


def test_memories_ended_by_another_connection_are_hidden_at_once(store_at: dict[str, Any]) -> None:
    """Which memories ended, and when, is kept between recalls (each asks as of its own
    moment) only while the profile is unchanged: a memory another connection ends, or
    gives back, is hidden or shown by the next recall."""
    settings = Settings(embedder="fake")
    with (
        Memory(**store_at, settings=settings) as mine,
        Memory(**store_at, settings=settings) as theirs,
    ):
        first = mine.remember("the standup is at nine", event_time="2024-01-01T00:00:00Z")
        mine.update(first.id, "the standup is at ten", event_time="2024-06-01T00:00:00Z")
        retro = mine.remember("the retro is on Friday", event_time="2024-01-01T00:00:00Z")
        now = "2025-01-01T00:00:00Z"
        assert first.id not in mine.recall("standup nine", now=now).ids
        assert retro.id in mine.recall("retro Friday", now=now).ids
        newer = theirs.update(retro.id, "the retro is on Monday", event_time="2024-06-01T00:00:00Z")
        assert retro.id not in mine.recall("retro Friday", now=now).ids
        theirs.forget([newer.id])
        assert retro.id in mine.recall("retro Friday", now=now).ids
