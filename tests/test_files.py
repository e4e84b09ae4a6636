"""Issue #32, files: what slm creates is its owner's alone (the store, its WAL and shared
memory, its index files, exports, backups, calibration output), whatever the umask, and a
write never goes through a symlink it did not make."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from slm import Memory, Settings
from slm.cli import cli
from slm.index.vectors import GraphIndex
from slm.store.files import private_directory, write_private


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def open_umask() -> Iterator[None]:
    """The most common umask, under which files are world-readable by default."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_a_new_store_and_its_directories_are_private(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    path = tmp_path / "home" / "slm" / "memory.db"
    memory = Memory(path, settings=Settings(embedder="fake"))
    try:
        memory.store_many([{"content": f"note {i} about the garden"} for i in range(20)])
        for part in ("", "-wal", "-shm"):
            assert mode(path.with_name(path.name + part)) == 0o600, part
        assert mode(tmp_path / "home") == 0o700 and mode(tmp_path / "home" / "slm") == 0o700
    finally:
        memory.close()
    assert mode(tmp_path) == 0o755  # a directory that already existed keeps its mode


def test_an_existing_store_keeps_the_mode_its_owner_gave_it(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    Memory(path, settings=Settings(embedder="fake")).close()
    path.chmod(0o640)
    Memory(path, settings=Settings(embedder="fake")).close()
    assert mode(path) == 0o640


def test_saved_index_files_are_private(tmp_path: Path) -> None:
    graph = GraphIndex(8)
    vectors = np.random.default_rng(1).standard_normal((10, 8)).astype(np.float32)
    graph.add(list(range(10)), vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    folder = tmp_path / "store.db.index"
    graph.save(folder, "default", {"store_id": "x"})
    assert mode(folder) == 0o700
    files = list(folder.iterdir())
    assert files and all(mode(f) == 0o600 for f in files), [(f.name, mode(f)) for f in files]


def test_export_and_backup_are_private_and_refuse_symlinks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLM_EMBEDDER", "fake")
    monkeypatch.setenv("SLM_DB", str(tmp_path / "cli.db"))
    runner = CliRunner()
    assert runner.invoke(cli, ["remember", "Priya is allergic to cats"]).exit_code == 0
    # A symlink planted where the old export wrote its partial file changes nothing now.
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "out.jsonl.partial").symlink_to(victim)
    done = runner.invoke(cli, ["export", str(tmp_path / "out.jsonl")])
    assert done.exit_code == 0, done.output
    assert victim.read_text() == "keep me" and mode(tmp_path / "out.jsonl") == 0o600
    assert "Priya" in (tmp_path / "out.jsonl").read_text()
    # Export or back up onto a symlink: refused, nothing written where it points.
    (tmp_path / "link.jsonl").symlink_to(victim)
    refused = runner.invoke(cli, ["export", str(tmp_path / "link.jsonl")])
    assert refused.exit_code != 0 and "symbolic link" in refused.output
    refused = runner.invoke(cli, ["backup", str(tmp_path / "link.jsonl"), "--force"])
    assert refused.exit_code != 0 and "symbolic link" in refused.output
    assert victim.read_text() == "keep me"
    copy = runner.invoke(cli, ["backup", str(tmp_path / "copy.db")])
    assert copy.exit_code == 0, copy.output
    assert mode(tmp_path / "copy.db") == 0o600
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial") and not p.is_symlink()]


def test_calibration_output_is_written_whole_and_private(tmp_path: Path) -> None:
    target = tmp_path / "calibration.json"
    write_private(target, json.dumps({"calibration_id": "x"}))
    assert mode(target) == 0o600 and json.loads(target.read_text())["calibration_id"] == "x"
    private_directory(tmp_path / "a" / "b")
    assert mode(tmp_path / "a") == 0o700 and mode(tmp_path / "a" / "b") == 0o700
