"""Vector indexes: the exact and graph kinds agree, the graph persists next to the SQLite
file with a watermark, follows changes made after it was saved, and is never trusted when
it belongs to another database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import slm.index.vector_cache as sqlite_vectors
from slm import Memory, Settings
from slm.index import Indexes
from slm.index.vectors import ExactIndex, GraphIndex
from slm.store.sqlite import SQLiteStore

DIM = 16

#: A graph index keeps half-precision vectors: a cosine is off by up to about 1e-4.
HALF = 1e-3


def unit(rows: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(rows, DIM)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


@pytest.fixture
def small_exact_max(monkeypatch: pytest.MonkeyPatch) -> None:
    """Profiles above 50 vectors get a graph index, so tests stay small."""
    monkeypatch.setattr(sqlite_vectors, "EXACT_MAX", 50)
    monkeypatch.setattr(sqlite_vectors, "SAVE_EVERY", 10)


def test_graph_matches_exact_on_small_sets() -> None:
    vectors = unit(300)
    keys = list(range(10, 310))
    exact, graph = ExactIndex(DIM), GraphIndex(DIM)
    exact.add(keys, vectors)
    graph.add(keys, vectors)
    for query in unit(20, seed=1):
        assert [k for k, _ in graph.search(query, 5)] == [k for k, _ in exact.search(query, 5)]
    assert np.allclose(graph.mean(), exact.mean(), atol=1e-6)
    # The graph keeps half-precision vectors: equal to the rows within fp16 rounding.
    assert np.allclose(graph.get([12, 40]), exact.get([12, 40]), atol=1e-3)


def test_graph_tombstones_filters_and_compaction() -> None:
    vectors = unit(200)
    graph = GraphIndex(DIM)
    graph.add(list(range(200)), vectors)
    top = graph.search(vectors[7], 1)
    assert top[0][0] == 7 and top[0][1] == pytest.approx(1.0, abs=HALF)
    graph.remove([7])
    assert 7 not in [k for k, _ in graph.search(vectors[7], 10)]
    assert graph.get([7]) is None and len(graph) == 199
    assert all(k in {1, 2, 3} for k, _ in graph.search(vectors[7], 10, allowed={1, 2, 3}))
    assert all(k < 50 for k, _ in graph.search(vectors[7], 10, below=50))
    graph.remove(range(100, 130))  # past the tombstone share: the graph is rebuilt
    assert len(graph) == 169
    assert all(not 100 <= k < 130 for k, _ in graph.search(vectors[110], 20))
    expected = vectors[[i for i in range(200) if i != 7 and not 100 <= i < 130]].mean(axis=0)
    assert np.allclose(graph.mean(), expected, atol=1e-5)


def test_search_many_matches_single_searches() -> None:
    vectors = unit(120)
    for index in (ExactIndex(DIM), GraphIndex(DIM)):
        index.add(list(range(120)), vectors)
        many = index.search_many(vectors[:5], 3)
        single = [index.search(v, 3) for v in vectors[:5]]
        assert [[k for k, _ in row] for row in many] == [[k for k, _ in row] for row in single]
        for row, other in zip(many, single, strict=True):
            assert [s for _, s in row] == pytest.approx([s for _, s in other], abs=1e-5)


class Indexed(SQLiteStore):
    """A SQLite store with its indexes beside it, as :class:`slm.Memory` holds them: its
    vector indexes as ``vectors``, their health in ``health()``, saved at ``close()``."""

    def __init__(self, path: str | Path, *, dim: int) -> None:
        super().__init__(path, dim=dim)
        self.indexes = Indexes(self)
        self.vectors = self.indexes.vectors

    def health(self) -> dict[str, Any]:
        return {**super().health(), **self.indexes.info()}

    def close(self) -> None:
        self.indexes.close()
        super().close()


def fill(store: SQLiteStore, profile: str, vectors: np.ndarray, start: int = 0) -> list[str]:
    """Insert rows carrying ``vectors`` straight through the store (no engine needed)."""
    from slm.engine import content_hash
    from slm.models import NewMemory

    now = __import__("datetime").datetime(2024, 1, 1, tzinfo=__import__("datetime").UTC)
    items = [
        NewMemory(
            content=f"memory {start + i}",
            content_hash=content_hash(f"memory {start + i}"),
            event_time=now,
            recorded_at=now,
            source=None,
            confidence=1.0,
            metadata={},
            tags=(),
            terms=("memory",),
            vector=v.astype("<f4").tobytes(),
        )
        for i, v in enumerate(vectors)
    ]
    return [s.id for s in store.insert(profile, items)]


def manifest(path: Path, profile: str = "p") -> dict[str, object]:
    data: dict[str, object] = json.loads(
        (Path(f"{path}.index") / f"{profile}.json").read_text("utf-8")
    )
    return data


def test_large_profile_index_is_saved_and_reused(tmp_path: Path, small_exact_max: None) -> None:
    path = tmp_path / "s.db"
    vectors = unit(120)
    store = Indexed(path, dim=DIM)
    ids = fill(store, "p", vectors)
    assert store.vectors.search("p", vectors[3], 1, None)[0][1] == pytest.approx(1.0, abs=HALF)
    assert store.health()["vector_indexes"]["p"]["kind"] == "graph"
    store.close()
    saved = manifest(path)
    assert saved["max_key"] == 120 and Path(f"{path}.index", str(saved["file"])).exists()

    # Changes made while no index was loaded are applied from the watermark on open.
    writer = Indexed(path, dim=DIM)
    more = unit(5, seed=9)
    fill(writer, "p", more, start=500)
    writer.delete("p", ids[:2])
    writer.vectors._own.states.clear()  # this process never loaded the index: nothing saved
    writer.close()
    assert manifest(path)["max_key"] == 120

    reader = Indexed(path, dim=DIM)
    top = reader.vectors.search("p", more[0], 1, None)
    assert top[0][1] == pytest.approx(1.0, abs=HALF)
    keys = [k for k, _ in reader.vectors.search("p", vectors[0], 5, None)]
    assert 1 not in keys and 2 not in keys
    _, count = reader.vectors.mean("p")
    assert count == 123
    reader.close()


def test_index_of_another_database_is_ignored(tmp_path: Path, small_exact_max: None) -> None:
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    store = Indexed(first, dim=DIM)
    fill(store, "p", unit(80))
    store.vectors.search("p", unit(1)[0], 1, None)
    store.close()
    other = Indexed(second, dim=DIM)
    vectors = unit(60, seed=4)
    fill(other, "p", vectors)
    other.close()
    # b.db restored over with a.db's index beside it: same profile, different store_id.
    os.rename(f"{first}.index", f"{second}.index.tmp")
    os.system(f"rm -rf {second}.index && mv {second}.index.tmp {second}.index")
    reopened = Indexed(second, dim=DIM)
    top = reopened.vectors.search("p", vectors[5], 1, None)
    assert top[0][1] == pytest.approx(1.0, abs=HALF)
    assert reopened.vectors.mean("p")[1] == 60
    reopened.close()


def test_corrupt_index_file_is_rebuilt(tmp_path: Path, small_exact_max: None) -> None:
    path = tmp_path / "s.db"
    store = Indexed(path, dim=DIM)
    vectors = unit(90)
    fill(store, "p", vectors)
    store.vectors.search("p", vectors[0], 1, None)
    store.close()
    data = Path(f"{path}.index", str(manifest(path)["file"]))
    data.write_bytes(b"not an index")
    reopened = Indexed(path, dim=DIM)
    assert reopened.vectors.search("p", vectors[8], 1, None)[0][0] == 9
    reopened.close()


def test_killed_writer_leaves_a_usable_index(tmp_path: Path) -> None:
    """A process killed after writing (its index unsaved) loses nothing: the next process
    loads the last saved index and applies the rows after its watermark."""
    path = tmp_path / "s.db"
    script = f"""
import os, signal, numpy as np
import slm.index.vector_cache as sv
sv.EXACT_MAX = 50
sv.SAVE_EVERY = 10**9
import tests.test_vector_index as t
store = t.Indexed({str(path)!r}, dim={DIM})
t.fill(store, "p", t.unit(100))
store.vectors.search("p", t.unit(1)[0], 1, None)
store.vectors._own.save_all()
t.fill(store, "p", t.unit(30, seed=3), start=1000)
store.vectors.search("p", t.unit(1)[0], 1, None)
os.kill(os.getpid(), signal.SIGKILL)
"""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", script], cwd=root, check=False)
    assert done.returncode == -9
    assert manifest(path)["max_key"] == 100
    store = Indexed(path, dim=DIM)
    late = unit(30, seed=3)
    assert store.vectors.search("p", late[4], 1, None)[0][1] == pytest.approx(1.0, abs=HALF)
    assert store.vectors.mean("p")[1] == 130
    store.close()


def test_reindex_rebuilds_the_vector_index(tmp_path: Path, small_exact_max: None) -> None:
    path = tmp_path / "m.db"
    with Memory(path, profile="p", settings=Settings(embedder="fake")) as memory:
        memory.remember_many([{"content": f"note number {i} about item {i}"} for i in range(70)])
        assert memory.recall("note number 5").results
        first = manifest(path)["file"]
        memory.reindex()
        assert manifest(path)["file"] != first
        assert memory.recall("note number 5").results[0].memory.content.startswith("note")


def test_profiles_sharing_a_prefix_keep_their_own_files(
    tmp_path: Path, small_exact_max: None
) -> None:
    """Profile names may contain dots: saving or rebuilding ``a`` never touches ``a.b``."""
    path = tmp_path / "s.db"
    store = Indexed(path, dim=DIM)
    for profile, seed in (("a", 1), ("a.b", 2)):
        fill(store, profile, unit(70, seed=seed), start=1000 * seed)
        store.vectors.search(profile, unit(1)[0], 1, None)
        store.vectors._own.save(profile, store.vectors._own.states[profile])
    store.vectors.rebuild("a")
    store.close()
    for profile in ("a", "a.b"):
        saved = manifest(path, profile)
        assert Path(f"{path}.index", str(saved["file"])).exists()


def test_restored_copy_never_trusts_a_newer_index(tmp_path: Path, small_exact_max: None) -> None:
    """A database put back from an older copy, beside the index saved for the newer one:
    a copy made by ``backup`` has its own identity, and a plain file copy has a watermark
    behind the saved one; either way the index is rebuilt from the restored rows."""
    import shutil

    path = tmp_path / "s.db"
    store = Indexed(path, dim=DIM)
    old = unit(60)
    fill(store, "p", old)
    store.vectors.search("p", old[0], 1, None)
    store.backup(tmp_path / "backup.db")
    store.close()
    shutil.copy(path, tmp_path / "plain.db")  # closed store: the file is whole
    store = Indexed(path, dim=DIM)
    fill(store, "p", unit(40, seed=5), start=100)
    store.vectors.search("p", old[0], 1, None)
    store.close()
    assert manifest(path)["max_key"] == 100

    for copy in ("backup.db", "plain.db"):
        shutil.copy(tmp_path / copy, path)
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        restored = Indexed(path, dim=DIM)
        assert restored.vectors.mean("p")[1] == 60
        fresh = unit(3, seed=8)
        fill(restored, "p", fresh, start=900)  # reuses keys 61..63 of the newer database
        top = restored.vectors.search("p", fresh[1], 1, None)
        assert top[0][1] == pytest.approx(1.0, abs=HALF)
        restored.close()


def test_closing_saves_the_graph_up_to_the_last_write(
    tmp_path: Path, small_exact_max: None
) -> None:
    """Rows written after the last search are applied before the graph is saved at close."""
    path = tmp_path / "s.db"
    store = Indexed(path, dim=DIM)
    fill(store, "p", unit(120))
    store.vectors.search("p", unit(1, seed=3)[0], 1, None)  # loads and catches up: 120
    fill(store, "p", unit(4, seed=8), start=500)  # written after the last search
    store.close()
    assert manifest(path)["max_key"] == 124
    reader = Indexed(path, dim=DIM)
    reader.vectors.search("p", unit(1, seed=3)[0], 1, None)
    assert reader.health()["vector_indexes"]["p"]["unsaved_changes"] == 0
    reader.close()
