"""Issue #32, faults that lose nothing, on both stores: the disk filling up during a batch,
the PostgreSQL server restarting during a batch, and a process killed during reindex or
while it writes a ranker or a calibration artefact (docs/reliability.md, "Faults").

A full disk is a real small file system: a tmpfs mounted for the test (the store's file, or
a PostgreSQL tablespace holding the database, on it). Mounting needs root; elsewhere those
tests skip, unless SLM_REQUIRE_FAULTS=1 (as in CI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from postgres_server import TEMPLATE, Server, Unavailable
from test_reliability import WORKER, env, kill, wait_for

from slm import Memory, Settings, StoreError

FAKE = Settings(embedder="fake")
REQUIRED = os.environ.get("SLM_REQUIRE_FAULTS") == "1"


def notes(n: int, words: int = 8, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"content": f"note {i} about topic {i % 17} " + " ".join(f"w{i}x{j}" for j in range(words))}
        for i in range(start, start + n)
    ]


@contextmanager
def small_disk(path: Path, size: str, owner: str | None = None) -> Iterator[Path]:
    """A file system of ``size`` mounted at ``path`` for the duration."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size},mode=0755"
    if owner is not None:
        user = pwd.getpwnam(owner)
        options += f",uid={user.pw_uid},gid={user.pw_gid}"
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        reason = f"cannot mount a small file system here: {done.stderr.strip()}"
        if REQUIRED:
            pytest.fail(f"SLM_REQUIRE_FAULTS=1: {reason}")
        pytest.skip(reason)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(folder: Path, leave: int) -> Path:
    """Fill the file system holding ``folder`` until ``leave`` bytes are free."""
    stats = os.statvfs(folder)
    free = stats.f_bavail * stats.f_frsize
    filler = folder / "filler"
    with open(filler, "wb") as handle:
        handle.truncate(0)
        handle.write(b"\0" * max(0, free - leave))
    return filler


def integrity(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        return list(db.execute("PRAGMA integrity_check").fetchall())


# -- a full disk ---------------------------------------------------------------------------


def test_a_full_disk_during_a_batch_leaves_the_sqlite_store_as_it_was(tmp_path: Path) -> None:
    if os.geteuid() != 0 and not REQUIRED:
        pytest.skip("mounting a small file system needs root")
    with small_disk(tmp_path / "disk", "2m") as disk:
        path = disk / "store.db"
        with Memory(path, settings=FAKE) as memory:
            memory.store_many(notes(20))
            before = [r.id for r in memory.recall("which note is about topic 3?", k=5).results]
            with pytest.raises(StoreError, match=r"the disk holding .* is full") as refused:
                memory.store_many(notes(600, words=120, start=100))
            assert "nothing of this write was stored" in str(refused.value)
            # The same open store still answers, with exactly what it held.
            assert memory.count() == 20
            after = [r.id for r in memory.recall("which note is about topic 3?", k=5).results]
            assert after == before
        # Closing gave back the log's unused room: a write works and the store checks clean.
        with Memory(path, settings=FAKE) as memory:
            assert memory.count() == 20
            memory.store_many(notes(5, start=1000))
            assert memory.count() == 25
        assert integrity(path) == [("ok",)]


@pytest.fixture(scope="module")
def own_server() -> Iterator[Server]:
    """A PostgreSQL server of this module's own: these tests restart it and give it a tiny
    tablespace, which the session's shared server must not see."""
    try:
        server = Server()
    except Unavailable as exc:
        if os.environ.get("SLM_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"SLM_REQUIRE_POSTGRES=1: {exc}")
        pytest.skip(f"no PostgreSQL server: {exc}")
    yield server
    server.stop()


def test_a_full_disk_during_a_batch_leaves_the_postgres_store_as_it_was(
    own_server: Server,
) -> None:
    if own_server.user is None and not REQUIRED:
        pytest.skip("mounting a small file system needs root")
    # Not under pytest's private temporary directory: the server's user must reach it.
    outside = Path(tempfile.mkdtemp(prefix="slm-disk-"))
    outside.chmod(0o755)
    with small_disk(outside / "disk", "48m") as disk:
        room = disk / "pg"
        room.mkdir()
        if own_server.user is not None:
            shutil.chown(room, own_server.user, own_server.user)
        own_server.admin(f"CREATE TABLESPACE tiny LOCATION '{room}'")
        own_server.admin(
            f"CREATE DATABASE full_disk TEMPLATE {TEMPLATE} TABLESPACE tiny STRATEGY FILE_COPY"
        )
        try:
            with Memory(dsn=own_server.dsn("full_disk"), settings=FAKE) as memory:
                memory.store_many(notes(20))
                filler = fill(disk, leave=256 * 1024)
                with pytest.raises(StoreError, match=r"the disk holding .* is full") as refused:
                    memory.store_many(notes(600, words=120, start=100))
                assert "nothing of this write was stored" in str(refused.value)
                assert memory.count() == 20
                assert memory.recall("which note is about topic 3?", k=5).results
                filler.unlink()
                memory.store_many(notes(5, start=1000))
                assert memory.count() == 25
        finally:
            own_server.admin("DROP DATABASE IF EXISTS full_disk WITH (FORCE)")
            own_server.admin("DROP TABLESPACE IF EXISTS tiny")
    shutil.rmtree(outside, ignore_errors=True)


# -- the server restarting ------------------------------------------------------------------


def test_a_postgres_restart_during_a_batch_leaves_no_half_batch(own_server: Server) -> None:
    """The batch is held inside its transaction (its memories, vectors and postings written,
    waiting for a row another connection locks) when the server restarts: the batch fails
    with a clear error, none of it is stored, and the same Memory works again at once."""
    own_server.admin(f"CREATE DATABASE restarted TEMPLATE {TEMPLATE} STRATEGY FILE_COPY")
    dsn = own_server.dsn("restarted")
    try:
        with Memory(dsn=dsn, settings=FAKE) as memory:
            memory.store_many(notes(20))
            # Idle connections in the pool, as after concurrent use: all dead after the restart.
            pool = memory.store._pool  # type: ignore[attr-defined]
            taken = [pool.getconn() for _ in range(3)]
            for conn in taken:
                pool.putconn(conn)
            locker = psycopg.connect(dsn)
            locker.execute("SELECT 1 FROM lex_stats WHERE profile = 'default' FOR UPDATE")
            failure: list[BaseException] = []

            def batch() -> None:
                try:
                    memory.store_many(notes(50, start=100))
                except BaseException as exc:
                    failure.append(exc)

            writer = threading.Thread(target=batch)
            writer.start()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                waiting = psycopg.connect(own_server.dsn(), autocommit=True).execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = 'restarted' AND wait_event_type = 'Lock'"
                )
                if waiting.fetchone() == (1,):
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the batch never reached the locked row")
            own_server.restart()
            writer.join(timeout=60)
            locker.close()
            assert len(failure) == 1 and isinstance(failure[0], StoreError), failure
            # The next calls work on the same Memory, without reopening it.
            assert memory.count() == 20
            assert memory.recall("which note is about topic 3?", k=5).results
            memory.store_many(notes(5, start=1000))
            assert memory.count() == 25
        with psycopg.connect(dsn) as conn:
            rows = conn.execute("SELECT count(*) FROM memories").fetchone()
            assert rows == (25,)
    finally:
        own_server.admin("DROP DATABASE IF EXISTS restarted WITH (FORCE)")


# -- a process killed -------------------------------------------------------------------------


def test_killed_during_reindex_the_store_opens_answers_and_reindexes(tmp_path: Path) -> None:
    store, marker = tmp_path / "reindex.db", tmp_path / "inside-reindex"
    with Memory(store, settings=FAKE) as memory:
        memory.store_many(notes(200))
        asked = [f"which note is about topic {t}?" for t in range(5)]
        before = [[r.id for r in memory.recall(q, k=5).results] for q in asked]
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "hang-reindex", str(store), str(marker), "2"], env=env()
    )
    wait_for(marker.exists, proc)
    kill(proc)
    assert integrity(store) == [("ok",)]
    with Memory(store, settings=FAKE) as memory:
        assert memory.count() == 200
        assert all(memory.recall(q, k=5).results for q in asked)
        assert memory.reindex() == 200
        assert [[r.id for r in memory.recall(q, k=5).results] for q in asked] == before


def test_killed_while_writing_its_ranker_the_store_keeps_the_last_one(tmp_path: Path) -> None:
    store, marker = tmp_path / "ranker.db", tmp_path / "inside-ranker-write"
    with Memory(store, settings=FAKE) as memory:
        memory.store_many(notes(60))
        kept = memory.health()["ranking"]
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "hang-ranker", str(store), str(marker)], env=env()
    )
    wait_for(marker.exists, proc, timeout=120)
    kill(proc)
    assert integrity(store) == [("ok",)]
    with Memory(store, settings=FAKE) as memory:
        assert memory.health()["ranking"] == kept  # the ranker it had, not half of a new one
        assert memory.recall("which note is about topic 3?", k=5).results


def test_killed_while_writing_a_calibration_the_old_one_stays_whole(tmp_path: Path) -> None:
    target, marker = tmp_path / "calibration.json", tmp_path / "before-rename"
    old = json.dumps({"calibration_id": "old"})
    target.write_text(old)
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "hang-artefact", str(target), str(marker)], env=env()
    )
    wait_for(marker.exists, proc)
    kill(proc)
    assert target.read_text() == old
