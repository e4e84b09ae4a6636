"""What is saved beside a store (vector graphs, edge arrays, their manifests) is checked
before use, and rebuilt from the rows when it fails, with one warning: never a 5xx, a
traceback or unbounded memory. Each finding of the probe as its steps, then a fuzz of
every saved file format in a process with a memory cap."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

import slm
from slm import Memory, Settings
from slm.index import edges as edge_index
from slm.index import vector_cache
from slm.index.edges import ROW
from slm.server.rest import create_app
from slm.store import Location

FAKE = Settings(embedder="fake")
HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Save edge arrays from 10 memories and vector graphs from 50."""
    monkeypatch.setattr(edge_index, "SAVE_MIN", 10)
    monkeypatch.setattr(vector_cache, "EXACT_MAX", 50)


def talk(n: int = 120) -> list[dict[str, str]]:
    topics = ["rail timetable", "boiler service", "garden Lisbon"]
    return [{"role": "user" if i % 2 else "assistant", "content": f"{topics[i % 3]} {i}"}
            for i in range(n)]  # fmt: skip


def stored(path: Path, profile: str = "default") -> tuple[str, dict[int, Any]]:
    """A store with a saved graph and saved edge arrays: the top id for one query and
    every memory's edges, as the pristine files give them."""
    with Memory(path, profile=profile, settings=FAKE) as memory:
        memory.remember_conversation(talk(), session="s")
        return answers(memory)


def answers(memory: Memory) -> tuple[str, dict[int, Any]]:
    top = memory.recall("rail timetable 17", k=1).results[0].memory.id
    keys = [r.key for r in memory.list(limit=500)]
    return top, memory.indexes.edges.edges_from(memory.profile, keys)


def manifest_of(folder: Path, name: str) -> dict[str, Any]:
    return dict(json.loads((folder / f"{name}.json").read_text("utf-8")))


def signed(folder: Path, name: str, data: bytes, **changes: Any) -> None:
    """Write ``data`` as the data file of ``name`` with a manifest that matches it (its size
    and digest, as slm records them): what a forger, not a torn write, leaves."""
    manifest = {**manifest_of(folder, name), **changes}
    (folder / manifest["file"]).write_bytes(data)
    manifest["bytes"] = len(data)
    manifest["sha256"] = hashlib.sha256(name.encode() + b"\0" + data).hexdigest()
    (folder / f"{name}.json").write_text(json.dumps(manifest), "utf-8")


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "failed its check" in r.getMessage()]


# -- F4: an edge file of the right size, wrong inside ---------------------------------------


def edge_parts(folder: Path) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray]:
    manifest = manifest_of(folder, "default#edges")
    data = (folder / manifest["file"]).read_bytes()
    rows, memories = manifest["rows"], manifest["memories"]
    table = np.frombuffer(data, dtype=ROW, count=rows).copy()
    keys = np.frombuffer(data, dtype="<i8", count=memories, offset=rows * ROW.itemsize).copy()
    starts = np.frombuffer(
        data, dtype="<i8", count=memories + 1, offset=rows * ROW.itemsize + memories * 8
    ).copy()
    return manifest, table, keys, starts


def wrong_inside(kind: str, table: np.ndarray, keys: np.ndarray, starts: np.ndarray) -> None:
    if kind == "kind code":
        table["kind"][len(table) // 2] = 200
    elif kind == "offsets falling":
        starts[2], starts[3] = starts[3], starts[2]
    elif kind == "offsets rising elsewhere":
        starts[1] = starts[-2]
    elif kind == "keys falling":
        keys[1], keys[2] = keys[2], keys[1]
    elif kind == "neighbour":
        table["dst"][0] = 10**12
    else:
        table["weight"][0] = np.nan


@pytest.mark.parametrize(
    "kind",
    [
        "kind code",
        "offsets falling",
        "offsets rising elsewhere",
        "keys falling",
        "neighbour",
        "weight",
    ],
)
@pytest.mark.parametrize("manifest_matches", [False, True])
def test_an_edge_file_of_the_right_size_but_wrong_inside_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str, manifest_matches: bool
) -> None:
    """Only the size and the first and last offsets were checked: out-of-range kind bytes
    made every recall of the profile a REST 500 until ``slm reindex``; offsets out of
    order gave errors or other memories' edges. Now the file must be the one saved and
    well formed (checked also when its manifest was made to match it), else it is rebuilt
    from the rows with one warning, and recall answers as before."""
    path = tmp_path / "s.db"
    expected = stored(path)
    folder = Path(f"{path}.index")
    manifest, table, keys, starts = edge_parts(folder)
    wrong_inside(kind, table, keys, starts)
    data = table.tobytes() + keys.tobytes() + starts.tobytes()
    if manifest_matches:
        signed(folder, "default#edges", data)
    else:
        (folder / manifest["file"]).write_bytes(data)  # the same size, as the probe's
    with caplog.at_level(logging.WARNING, logger="slm"):
        app = create_app(Location(path=path), settings=FAKE, token=None, loopback_only=True)
        with TestClient(app, base_url="http://127.0.0.1:8765") as client:
            answer = client.post("/v1/recall", json={"query": "rail timetable 17", "k": 1})
            assert answer.status_code == 200, answer.text
            assert answer.json()["results"][0]["id"] == expected[0]
        with Memory(path, settings=FAKE) as memory:  # the saved arrays, rebuilt
            assert answers(memory) == expected
    assert len(warnings_of(caplog)) == 1


# -- F3: a manifest naming a file outside its folder, or another profile's ------------------


@pytest.mark.parametrize("where", ["absolute", "parent", "another profile's"])
def test_a_manifest_names_only_its_own_file_in_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    """A saved graph's manifest ``file`` was followed outside the index folder (an absolute
    path or ``../``), and another profile's file renamed into place was trusted. The file
    is now only one named as slm names it, for this profile, with the digest recorded."""
    path = tmp_path / "s.db"
    expected = stored(path)
    stored(path, profile="other")
    folder = Path(f"{path}.index")
    mine, theirs = manifest_of(folder, "default"), manifest_of(folder, "other")
    outside = tmp_path / "elsewhere" / "graph.faiss"
    outside.parent.mkdir()
    shutil.copyfile(folder / mine["file"], outside)
    if where == "absolute":
        mine["file"] = str(outside)
    elif where == "parent":
        mine["file"] = "../elsewhere/graph.faiss"
    else:
        shutil.copyfile(folder / theirs["file"], folder / mine["file"])
    (folder / "default.json").write_text(json.dumps(mine), "utf-8")
    built: list[str] = []
    build = vector_cache.VectorCache._build

    def counted(self: vector_cache.VectorCache, profile: str) -> Any:
        built.append(f"{profile}:{self.source.table}")
        return build(self, profile)

    monkeypatch.setattr(vector_cache.VectorCache, "_build", counted)
    with caplog.at_level(logging.WARNING, logger="slm"), Memory(path, settings=FAKE) as memory:
        assert answers(memory) == expected
    assert "default:embeddings" in built  # read from the rows, not from that file
    assert len(warnings_of(caplog)) == 1


def test_a_server_never_follows_a_manifest_out_of_its_folder(
    postgres_dsn: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The same on PostgreSQL, whose servers save their graphs in SLM_INDEX_DIR."""
    folder = tmp_path / "indexes"
    monkeypatch.setenv("SLM_INDEX_DIR", str(folder))
    with Memory(dsn=postgres_dsn, settings=FAKE) as memory:
        memory.remember_conversation(talk(), session="s")
        top = memory.recall("rail timetable 17", k=1).results[0].memory.id
        store_id = memory.store.store_id  # type: ignore[attr-defined]
    own = folder / store_id
    manifest = manifest_of(own, "default")
    outside = tmp_path / "graph.faiss"
    shutil.move(own / manifest["file"], outside)
    manifest["file"] = str(outside)
    (own / "default.json").write_text(json.dumps(manifest), "utf-8")
    with (
        caplog.at_level(logging.WARNING, logger="slm"),
        Memory(dsn=postgres_dsn, settings=FAKE) as memory,
    ):
        assert memory.recall("rail timetable 17", k=1).results[0].memory.id == top
    assert len(warnings_of(caplog)) == 1


# -- every format fuzzed, under a memory cap --------------------------------------------------

#: The address space the fuzzing process may use: a few times what it needs (numpy, faiss
#: and a small store take about 600 MB), far below what a trusted wild size would ask.
MEMORY_CAP = 1536 * 1024 * 1024


def test_every_saved_file_format_fuzzed_under_a_memory_cap(tmp_path: Path) -> None:
    """Byte flips, truncation, growth, emptied files, wrong manifest values, and edge files
    made consistent with their manifest: every damaged copy opens, recalls as the pristine
    store did and gives every memory its edges (rebuilt from the rows), in a process that
    may not use more than MEMORY_CAP."""

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    source = Path(slm.__file__).resolve().parents[1]  # the slm this test imports
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(source), str(HERE)])}
    done = subprocess.run(
        [sys.executable, str(HERE / "saved_files_worker.py"), str(tmp_path), "62", "4"],
        env=environ,
        preexec_fn=capped,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("answers unchanged") == 5, done.stdout
