"""The SQLite store's edge arrays (slm.store.sqlite_edges) give every memory exactly the
edges its rows hold, after any sequence of writes, updates, forgets and reindexes, by this
process or another, through saved arrays and merges alike."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slm import Memory, Settings
from slm.store import sqlite_edges
from slm.store.readcache import ReadCache
from slm.store.relational import Relational
from slm.store.sqlite_edges import EdgeArrays

WORDS = "boiler garden Lisbon Porto violin marathon sister dentist invoice Tuesday".split()


def _sentence(rng: random.Random) -> str:
    # few words, so that the fake embedder finds similar memories and links them
    return " ".join(rng.choice(WORDS[: rng.randint(3, len(WORDS))]) for _ in range(4))


def _keys(memory: Memory) -> list[int]:
    rows = memory.store.select(  # type: ignore[attr-defined]
        "SELECT key FROM memories WHERE profile = ?", (memory.profile,)
    )
    return [*sorted(row[0] for row in rows), 10**9]  # and a key that is no memory's


def _rows(memory: Memory) -> dict[int, Any]:
    """Every memory's edges as SQL reads them, around any cache."""
    store: Any = memory.store
    kept, store.cache = store.cache, ReadCache(None)
    try:
        return Relational.edges_from(store, memory.profile, _keys(memory))
    finally:
        store.cache = kept


def _arrays(memory: Memory) -> dict[int, Any]:
    return memory.store.edges_from(memory.profile, _keys(memory))


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Merge and save after a few changes, so that a short test goes through every path."""
    monkeypatch.setattr(sqlite_edges, "OVERLAY_MIN", 4)
    monkeypatch.setattr(sqlite_edges, "SAVE_MIN", 3)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_edge_arrays_equal_the_rows_after_any_writes(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    settings = Settings(embedder="fake")
    path = tmp_path / "m.db"
    with Memory(path, settings=settings) as mine, Memory(path, settings=settings) as theirs:
        ids: list[str] = []
        kinds: set[str] = set()
        for step in range(70):
            writer = mine if rng.random() < 0.7 else theirs
            when = start + timedelta(hours=step)
            roll = rng.random()
            session = {"session": rng.choice("ab")}
            if roll < 0.35 or len(ids) < 4:
                done = writer.remember(_sentence(rng), event_time=when, metadata=session)
                ids.append(done.id)
            elif roll < 0.5:
                batch = [
                    {"content": _sentence(rng), "event_time": when.isoformat(), "metadata": session}
                    for _ in range(rng.randint(2, 6))
                ]
                ids += [done.id for done in writer.remember_many(batch)]
            elif roll < 0.6:
                ids.append(writer.update(rng.choice(ids), _sentence(rng) + " again").id)
            elif roll < 0.75:
                writer.forget(ids.pop(rng.randrange(len(ids))))
            elif roll < 0.78:
                writer.reindex()
            rows = _rows(mine)
            kinds |= {kind for edges in rows.values() for _, kind, _ in edges}
            assert _arrays(mine) == rows, f"step {step}"
            assert _arrays(theirs) == rows, f"step {step}, the other process"
        assert kinds == {"next", "prev", "similar"}
        assert mine.store.edges.info()[mine.profile]["memories"] >= 3  # type: ignore[attr-defined]
    # a later process opens the saved arrays and catches up with what came after them
    with Memory(path, settings=settings) as reader:
        assert (tmp_path / "m.db.index" / "default#edges.json").exists()
        assert _arrays(reader) == _rows(reader)
        reader.remember("boiler garden Lisbon Porto", metadata={"session": "a"})
        assert _arrays(reader) == _rows(reader)


def test_saved_arrays_of_another_database_or_a_later_point_are_not_used(tmp_path: Path) -> None:
    settings = Settings(embedder="fake")
    path = tmp_path / "m.db"
    with Memory(path, settings=settings) as memory:
        for n in range(8):
            memory.remember(f"boiler garden {n}", metadata={"session": "a"})
        expected = _arrays(memory)
        assert expected == _rows(memory)
    manifest_path = tmp_path / "m.db.index" / "default#edges.json"
    saved = manifest_path.read_text()
    # saved ahead of the rows (a store restored from an older copy): read from the rows
    manifest_path.write_text(saved.replace('"top": ', '"top": 1000'))
    with Memory(path, settings=settings) as memory:
        assert _arrays(memory) == expected
    # a torn data file (of the arrays saved again then): read from the rows
    data = tmp_path / "m.db.index" / json.loads(manifest_path.read_text())["file"]
    data.write_bytes(data.read_bytes()[:-8])
    with Memory(path, settings=settings) as memory:
        assert _arrays(memory) == expected


def test_merged_arrays_hold_each_memory_s_new_edges_in_order() -> None:
    arrays = EdgeArrays.of_rows(
        [(1, 2, 1.0, "next"), (2, 1, 1.0, "prev"), (2, 3, 0.7, "similar"), (3, 2, 0.7, "similar")]
    )
    assert arrays.edges([3, 1, 9]) == {3: ((2, "similar", 0.7),), 1: ((2, "next", 1.0),)}
    merged = arrays.merged({2: ((1, "prev", 1.0),), 3: (), 4: ((1, "similar", 0.8),)})
    assert merged.edges([1, 2, 3, 4]) == {
        1: ((2, "next", 1.0),),
        2: ((1, "prev", 1.0),),
        4: ((1, "similar", 0.8),),
    }
    assert merged.keys.tolist() == [1, 2, 4] and np.all(np.diff(merged.table["src"]) >= 0)
