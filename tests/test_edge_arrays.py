"""The edge arrays (slm.index.edges) give every memory exactly the edges its rows hold, on
both stores, after any sequence of writes, updates, forgets and reindexes, by this handle
or another (another process, another server), through saved arrays and merges alike."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from store_checks import edge_rows

from slm import Memory, Settings
from slm.index import edges as edge_index
from slm.index.edges import EdgeArrays
from slm.index.saved import FORMAT

WORDS = "boiler garden Lisbon Porto violin marathon sister dentist invoice Tuesday".split()
FAKE = Settings(embedder="fake")


def _sentence(rng: random.Random) -> str:
    # few words, so that the fake embedder finds similar memories and links them
    return " ".join(rng.choice(WORDS[: rng.randint(3, len(WORDS))]) for _ in range(4))


def _keys(memory: Memory) -> list[int]:
    rows = memory.store.select(  # type: ignore[attr-defined]
        f"SELECT key FROM memories WHERE profile = {memory.store.mark}",  # type: ignore[attr-defined]
        (memory.profile,),
    )
    return [*sorted(row[0] for row in rows), 10**9]  # and a key that is no memory's


def _rows(memory: Memory) -> dict[int, Any]:
    """Every memory's edges as SQL reads them, around any index."""
    return edge_rows(memory.store, memory.profile)


def _arrays(memory: Memory) -> dict[int, Any]:
    return memory.indexes.edges.edges_from(memory.profile, _keys(memory))


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Merge and save after a few changes, so that a short test goes through every path."""
    monkeypatch.setattr(edge_index, "OVERLAY_MIN", 4)
    monkeypatch.setattr(edge_index, "SAVE_MIN", 3)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_edge_arrays_equal_the_rows_after_any_writes(store_at: dict[str, Any], seed: int) -> None:
    rng = random.Random(seed)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with Memory(**store_at, settings=FAKE) as mine, Memory(**store_at, settings=FAKE) as theirs:
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
            assert _arrays(theirs) == rows, f"step {step}, the other handle"
        assert kinds == {"next", "prev", "similar"}
        assert mine.indexes.edges.info()[mine.profile]["memories"] >= 3
    # a later handle opens the saved arrays (SQLite) and catches up with what came after them
    with Memory(**store_at, settings=FAKE) as reader:
        if "path" in store_at:
            assert Path(f"{store_at['path']}.index/default#edges.json").exists()
        assert _arrays(reader) == _rows(reader)
        reader.remember("boiler garden Lisbon Porto", metadata={"session": "a"})
        assert _arrays(reader) == _rows(reader)


def test_writes_between_catch_ups_are_followed_whole(store_at: dict[str, Any]) -> None:
    """What one handle reads in one catch-up after another wrote several times: turns
    written and forgotten in between (their turns before and after joined), and forgotten
    turns whose neighbours the reader held."""
    with Memory(**store_at, settings=FAKE) as writer, Memory(**store_at, settings=FAKE) as reader:
        turns = [
            writer.remember(f"turn {n} about the garden", metadata={"session": "s"})
            for n in range(6)
        ]
        assert _arrays(reader) == _rows(reader)
        more = [
            writer.remember(f"turn {n} about the violin", metadata={"session": "s"})
            for n in range(6, 9)
        ]
        writer.forget([more[0].id, turns[2].id])  # one held by the reader, one not
        writer.remember("turn 9 about the violin", metadata={"session": "s"})
        writer.forget(more[1].id)
        assert _arrays(reader) == _rows(reader)
        assert any(kind == "next" for edges in _rows(reader).values() for _, kind, _ in edges)


def test_saved_arrays_of_another_database_or_a_later_point_are_not_used(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, settings=FAKE) as memory:
        for n in range(8):
            memory.remember(f"boiler garden {n}", metadata={"session": "a"})
        expected = _arrays(memory)
        assert expected == _rows(memory)
        head = memory.store.feed_head(memory.profile)  # type: ignore[attr-defined]
    manifest_path = tmp_path / "m.db.index" / "default#edges.json"
    saved = json.loads(manifest_path.read_text())
    assert saved["format"] == FORMAT and 0 < saved["seq"] <= head
    saved["seq"] = head  # nothing to catch up with
    wrong = {"seq": 1000}, {"store_id": "another"}, {"format": "older"}, {"last_id": "another"}
    for change in [{}, *wrong]:
        # saved arrays emptied, so that using them shows: only the first are used
        EdgeArrays.of_rows([]).save(tmp_path / "m.db.index", "default#edges", {**saved, **change})
        with Memory(path, settings=FAKE) as memory:
            assert _arrays(memory) == (expected if change else {}), change
    # a torn data file (of the arrays saved again then): read from the rows
    data = tmp_path / "m.db.index" / json.loads(manifest_path.read_text())["file"]
    data.write_bytes(data.read_bytes()[:-8])
    with Memory(path, settings=FAKE) as memory:
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
