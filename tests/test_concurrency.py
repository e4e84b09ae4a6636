"""Many processes on one SQLite store: every write stored exactly once, no error surfaced.

The figures (writes/s under contention, busy retries) are printed; run with ``-s`` to see
them: ``pytest tests/test_concurrency.py -s``. docs/reliability.md quotes them.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from reliability_worker import FAKE, note

from slm import Memory, StoreError
from slm.store import sqlite_conn

WORKER = Path(__file__).with_name("reliability_worker.py")
WRITERS, WRITES, READERS = 8, 500, 2


def worker_env() -> dict[str, str]:
    # One BLAS thread per process: eight writers each spinning a thread pool on a small
    # machine measure the scheduler, not the store.
    return {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=worker_env(),
    )


def integrity(path: Path) -> list[tuple[str]]:
    with sqlite3.connect(path) as db:
        return db.execute("PRAGMA integrity_check").fetchall()


def test_eight_writers_and_two_readers_lose_nothing(tmp_path: Path) -> None:
    store, rundir = tmp_path / "shared.db", tmp_path / "run"
    rundir.mkdir()
    Memory(store, settings=FAKE).close()  # created once; the workers only open it
    writers = [spawn("write", str(store), str(w), str(WRITES), str(rundir)) for w in range(WRITERS)]
    readers = [spawn("read", str(store), str(r), str(rundir)) for r in range(READERS)]
    deadline = time.monotonic() + 120
    while len(list(rundir.glob("ready-*"))) < WRITERS + READERS:
        assert time.monotonic() < deadline, "the workers did not start"
        assert all(p.poll() is None for p in writers + readers), "a worker died at start"
        time.sleep(0.01)
    (rundir / "go").touch()
    wrote = [json.loads(p.communicate(timeout=600)[0]) for p in writers]
    (rundir / "stop").touch()
    read = [json.loads(p.communicate(timeout=120)[0]) for p in readers]
    assert [p.returncode for p in writers + readers] == [0] * (WRITERS + READERS)

    assert [w["errors"] for w in wrote] == [[]] * WRITERS
    assert [r["errors"] for r in read] == [[]] * READERS
    assert [r["partial"] for r in read] == [[]] * READERS
    assert all(r["recalls"] > 0 and r["results"] > 0 for r in read)
    with Memory(store, settings=FAKE) as memory:
        records = memory.list(limit=10_000)
        assert memory.count() == WRITERS * WRITES == len(records)
        by_content = {r.content: r for r in records}
        assert len(by_content) == len(records) and len({r.id for r in records}) == len(records)
        for w, report in enumerate(wrote):
            for i, id_ in enumerate(report["ids"]):
                expected = note(w, i)
                stored = by_content[expected["content"]]
                assert stored.id == id_ and stored.metadata == expected["metadata"]
        counts = memory.store.index_counts(memory.profile)
        assert counts == dict.fromkeys(counts, WRITERS * WRITES)
    assert integrity(store) == [("ok",)]

    seconds = max(w["ended"] for w in wrote) - min(w["began"] for w in wrote)
    retries = sum(w["retries"] for w in wrote)
    print(
        f"\n{WRITERS} writers x {WRITES} remember calls, {READERS} readers: "
        f"{WRITERS * WRITES / seconds:.0f} writes/s ({seconds:.1f} s), "
        f"{retries} busy retries by writers ({retries / (WRITERS * WRITES):.1f} per write), "
        f"{sum(r['retries'] for r in read)} by readers; "
        f"{sum(r['recalls'] for r in read)} recalls and {sum(r['lists'] for r in read)} lists "
        "during the writes, 0 errors"
    )


def remember_a_few(store: Path, worker: int) -> None:
    with Memory(store, settings=FAKE) as memory:
        for i in range(10):
            memory.remember(**note(worker, i))


def test_processes_creating_a_store_at_once(tmp_path: Path) -> None:
    """The first open (WAL switch, migrations) races safely with other first opens."""
    store = tmp_path / "new.db"
    context = multiprocessing.get_context("fork")  # no connection is open to fork with
    procs = [context.Process(target=remember_a_few, args=(store, w)) for w in range(6)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * 6
    with Memory(store, settings=FAKE) as memory:
        assert memory.count() == 60
    assert integrity(store) == [("ok",)]


def test_a_write_waits_for_another_writer_and_retries(tmp_path: Path) -> None:
    store = tmp_path / "busy.db"
    with Memory(store, settings=FAKE) as memory:
        blocker = sqlite3.connect(store, isolation_level=None, check_same_thread=False)
        blocker.execute("BEGIN IMMEDIATE")  # another process holding the write lock
        release = threading.Timer(0.3, blocker.execute, ["COMMIT"])
        release.start()
        began = time.monotonic()
        record = memory.remember("written once the lock was free")
        assert time.monotonic() - began >= 0.25
        release.join()
        blocker.close()
        assert memory.get(record.id).content == record.content
        assert memory.store.health()["busy_retries"] > 0


def test_the_wait_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_conn, "BUSY_TIMEOUT_S", 0.2)
    store = tmp_path / "stuck.db"
    with Memory(store, settings=FAKE) as memory:
        blocker = sqlite3.connect(store, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreError, match="stayed busy"):
                memory.remember("never written")
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert memory.count() == 0
        memory.remember("written now")
        assert memory.count() == 1


def test_a_failed_write_is_rolled_back_whole(tmp_path: Path) -> None:
    """A busy failure in the middle of a transaction reruns all of it, never half."""
    store = tmp_path / "retry.db"
    with Memory(store, settings=FAKE) as memory:
        conn = memory.store._conn  # type: ignore[attr-defined]
        calls = 0

        def flaky(db: sqlite3.Connection) -> int:
            nonlocal calls
            calls += 1
            db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (f"k{calls}", "v"))
            if calls < 3:
                raise sqlite3.OperationalError("database is locked")
            return calls

        assert conn.write(flaky) == 3
        rows = conn.rows("SELECT key FROM meta WHERE key LIKE 'k%' ORDER BY key")
        assert rows == [("k3",)]
