"""Crashes and backups: a process killed mid-write leaves only whole memories, a re-run
completes without duplicates, acknowledged writes survive, and ``slm backup`` copies a live
store consistently."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from reliability_worker import FAKE, NOTE
from store_checks import count, problems

from slm import Memory
from slm.cli import cli
from slm.copy.jsonl import IMPORT_BATCH, import_jsonl

WORKER = Path(__file__).with_name("reliability_worker.py")


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OPENBLAS_NUM_THREADS": "1", "SLM_EMBEDDER": "fake", **extra}


def facts(n: int) -> list[dict[str, Any]]:
    return [
        {
            "content": f"imported fact {i}: Maya moved item {i} to shelf {i % 97} in Lisbon",
            "source": "import",
            "event_time": f"2023-{1 + i % 12:02d}-{1 + i % 28:02d}T10:00:00Z",
            "metadata": {"n": i, "session": i // 10},
            "tags": [f"s{i % 7}"],
        }
        for i in range(n)
    ]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def wait_for(condition: Any, proc: subprocess.Popen[Any], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the process ended first: {proc.communicate()}")
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def kill(proc: subprocess.Popen[Any]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


# -- crash safety ----------------------------------------------------------------------------


def test_sigkill_inside_a_write_transaction(tmp_path: Path) -> None:
    """Killed in its third batch, after the memories, vectors and postings were written but
    before the commit: the store holds the two committed batches, whole, and nothing else."""
    store, marker = tmp_path / "crash.db", tmp_path / "inside-the-transaction"
    rows = facts(4 * IMPORT_BATCH)
    jsonl = write_jsonl(tmp_path / "facts.jsonl", rows)
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "hang", str(store), str(jsonl), str(marker), "3"],
        env=env(),
    )
    wait_for(marker.exists, proc)
    kill(proc)
    assert problems(store) == []
    assert count(store) == 2 * IMPORT_BATCH
    with Memory(store, settings=FAKE) as memory:
        assert memory.health()["channels"]["semantic"]["healthy"]
        report = import_jsonl(memory, jsonl)
        assert (report.stored, report.existing) == (len(rows) - 2 * IMPORT_BATCH, 2 * IMPORT_BATCH)
        stored = memory.list(limit=10_000)
        assert sorted(r.content for r in stored) == sorted(r["content"] for r in rows)
    assert problems(store) == []


def test_sigkill_during_slm_import_then_rerun(tmp_path: Path) -> None:
    """``slm import`` killed at a random moment after its first commit: whole batches only,
    and running the same import again completes it without duplicates."""
    store = tmp_path / "import.db"
    rows = facts(12 * IMPORT_BATCH)
    jsonl = write_jsonl(tmp_path / "facts.jsonl", rows)
    Memory(store, settings=FAKE).close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "slm", "import", str(jsonl), "--json"],
        env=env(SLM_DB=str(store)),
        stdout=subprocess.DEVNULL,
    )
    wait_for(lambda: count(store) >= IMPORT_BATCH, proc)
    time.sleep(random.uniform(0.0, 0.3))
    kill(proc)
    survived = count(store)
    assert IMPORT_BATCH <= survived < len(rows)
    assert survived % IMPORT_BATCH == 0
    assert problems(store) == []
    rerun = CliRunner().invoke(
        cli, ["--db", str(store), "import", str(jsonl), "--json"], env=env(), catch_exceptions=False
    )
    assert rerun.exit_code == 0, rerun.output
    report = json.loads(rerun.stdout)
    assert (report["stored"], report["existing"]) == (len(rows) - survived, survived)
    assert count(store) == len(rows)
    assert problems(store) == []


def test_acknowledged_writes_survive_sigkill(tmp_path: Path) -> None:
    store = tmp_path / "acks.db"
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "ack", str(store)],
        env=env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acknowledged = [proc.stdout.readline().strip() for _ in range(100)]
    kill(proc)
    acknowledged += proc.stdout.read().split()
    with Memory(store, settings=FAKE) as memory:
        assert len(memory.store.get(memory.profile, acknowledged)) == len(acknowledged)
        assert memory.count() >= len(acknowledged)
    assert problems(store) == []


# -- backup ----------------------------------------------------------------------------------


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), env=env(), catch_exceptions=False)


def test_backup_of_a_store_being_written(tmp_path: Path) -> None:
    store, copy, rundir = tmp_path / "live.db", tmp_path / "copy.db", tmp_path / "run"
    rundir.mkdir()
    (rundir / "go").touch()
    with Memory(store, settings=FAKE) as memory:
        memory.remember_many(facts(200))
    writer = subprocess.Popen(
        [sys.executable, str(WORKER), "write", str(store), "0", "400", str(rundir)],
        env=env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: count(store) >= 250, writer)
    made = run_cli("--db", str(store), "backup", str(copy), "--json")
    assert made.exit_code == 0, made.output
    still_writing = writer.poll() is None
    assert json.loads(writer.communicate(timeout=120)[0])["errors"] == []
    report = json.loads(made.stdout)
    assert report["file"] == str(copy) and report["bytes"] == copy.stat().st_size
    assert problems(copy) == []
    assert not Path(f"{copy}-wal").exists()  # one self-contained file
    with Memory(copy, settings=FAKE) as backed, Memory(store, settings=FAKE) as live:
        records = backed.list(limit=10_000)
        assert len(records) == report["memories"] == backed.count()
        assert live.store.get(live.profile, [r.id for r in records]) == backed.store.get(
            backed.profile, [r.id for r in records]
        )
        notes = sorted(int(m.group(2)) for r in records if (m := NOTE.fullmatch(r.content)))
        assert notes == list(range(len(notes)))  # a snapshot: the writer's first n, no gaps
        assert len(notes) >= 50 and (len(notes) < 400 or not still_writing)
    idle = tmp_path / "idle.db"
    assert run_cli("--db", str(store), "backup", str(idle)).exit_code == 0
    with Memory(idle, settings=FAKE) as backed, Memory(store, settings=FAKE) as live:
        for query in ("Where did Maya move item 12?", "worker 0 note 7", "shelf 40 in Lisbon"):
            # Each recall has its own query_id; everything else is the same.
            copied, original = backed.recall(query, k=10), live.recall(query, k=10)
            assert {**copied.to_dict(), "query_id": None} == {
                **original.to_dict(),
                "query_id": None,
            }


def test_backup_refuses_to_overwrite(tmp_path: Path) -> None:
    store, copy = tmp_path / "s.db", tmp_path / "copy.db"
    with Memory(store, settings=FAKE) as memory:
        memory.remember("one memory")
    copy.write_text("not a store")
    refused = run_cli("--db", str(store), "backup", str(copy))
    assert refused.exit_code == 1
    assert refused.stderr == f"error: {copy} exists; use --force to overwrite it\n"
    assert copy.read_text() == "not a store"
    assert run_cli("--db", str(store), "backup", str(copy), "--force").exit_code == 0
    assert count(copy) == 1
    for target in (store, Path(f"{store}-wal"), tmp_path):
        refused = run_cli("--db", str(store), "backup", str(target), "--force")
        assert refused.exit_code == 1 and refused.stderr.startswith("error: "), refused.output
        assert "\n" not in refused.stderr.rstrip("\n")
    assert problems(store) == [] and count(store) == 1
    missing_dir = run_cli("--db", str(store), "backup", str(tmp_path / "no" / "such.db"))
    assert missing_dir.exit_code == 1 and "no directory" in missing_dir.stderr


def test_backup_of_a_postgresql_store_is_pg_dumps_job(postgres_dsn: str, tmp_path: Path) -> None:
    refused = run_cli("--dsn", postgres_dsn, "backup", str(tmp_path / "copy.db"))
    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: ") and "pg_dump" in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert not (tmp_path / "copy.db").exists()


@pytest.mark.parametrize("name", ["copy.db", "a dir/with spaces.db"])
def test_backup_human_output(tmp_path: Path, name: str) -> None:
    store, copy = tmp_path / "s.db", tmp_path / name
    copy.parent.mkdir(exist_ok=True)
    with Memory(store, settings=FAKE) as memory:
        memory.remember_many([{"content": f"note {i}"} for i in range(3)])
    made = run_cli("--db", str(store), "backup", str(copy))
    assert made.stdout == f"backed up 3 memories to {copy}\n"
