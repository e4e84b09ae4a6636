"""A separate process for the reliability tests: writes, reads, or hangs inside a write.

    python reliability_worker.py write STORE WORKER COUNT RUNDIR
    python reliability_worker.py read STORE WORKER RUNDIR
    python reliability_worker.py hang STORE JSONL MARKER BATCH
    python reliability_worker.py ack STORE
    python reliability_worker.py hang-reindex STORE MARKER BATCH
    python reliability_worker.py hang-ranker STORE MARKER
    python reliability_worker.py hang-artefact TARGET MARKER

``write`` and ``read`` touch ``RUNDIR/ready-<name>``, wait for ``RUNDIR/go`` so every worker
starts at once, and print one JSON line of figures at the end (``read`` stops when
``RUNDIR/stop`` appears). ``hang`` imports JSONL and, in its BATCH-th write transaction
(1-based), after the memories, vectors and lexical rows are written but before the commit,
creates MARKER and sleeps until it is killed. ``ack`` remembers one memory after another and
prints each id once ``remember`` has returned. ``hang-reindex`` does the same inside the
BATCH-th transaction of ``reindex``; ``hang-ranker`` gives feedback until the profile's
ranker is refitted, and hangs inside the transaction that writes it; ``hang-artefact``
writes a new calibration artefact over TARGET and hangs after the new file is written,
before it takes TARGET's name.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from slm import Memory, Settings

FAKE = Settings(embedder="fake")
NOTE = re.compile(r"worker (\d+) note (\d+) about topic (\d+)")
#: A reader recalls (k=20), lists and counts, then pauses this long: an agent's pace. A
#: recall over 4,000 memories takes ~50 ms of CPU; without a pause two readers would take
#: a whole core of a small machine from the writers.
READ_PAUSE_S = 0.1


def note(worker: int, i: int) -> dict[str, Any]:
    """The ``i``-th memory of writer ``worker``: every field derived from the two numbers."""
    return {
        "content": f"worker {worker} note {i} about topic {i % 17}",
        "source": f"w{worker}",
        "metadata": {"w": worker, "i": i},
        "tags": [f"w{worker}", f"t{i % 17}"],
    }


def whole(record: Any) -> bool:
    """Whether a returned memory is exactly one that a writer wrote, every field intact."""
    match = NOTE.fullmatch(record.content)
    if match is None:
        return False
    expected = note(int(match.group(1)), int(match.group(2)))
    return (
        record.source == expected["source"]
        and record.metadata == expected["metadata"]
        and list(record.tags) == expected["tags"]
    )


def _start(rundir: Path, name: str) -> None:
    (rundir / f"ready-{name}").touch()
    while not (rundir / "go").exists():
        time.sleep(0.005)


def write(store: str, worker: int, count: int, rundir: Path) -> dict[str, Any]:
    errors: list[str] = []
    ids: list[str | None] = []
    with Memory(store, settings=FAKE) as memory:
        _start(rundir, f"w{worker}")
        began = time.time()
        for i in range(count):
            try:
                ids.append(memory.remember(**note(worker, i)).id)
            except Exception as exc:  # every failure is reported, none may happen
                errors.append(f"{type(exc).__name__}: {exc}")
                ids.append(None)
        ended = time.time()
        retries = memory.store.health()["busy_retries"]
    return {"began": began, "ended": ended, "errors": errors, "retries": retries, "ids": ids}


def read(store: str, worker: int, rundir: Path) -> dict[str, Any]:
    errors: list[str] = []
    recalls = results = lists = 0
    partial: list[str] = []
    last_count = 0
    with Memory(store, settings=FAKE) as memory:
        _start(rundir, f"r{worker}")
        while not (rundir / "stop").exists():
            try:
                topic = (recalls + worker) % 17
                response = memory.recall(f"which note is about topic {topic}?", k=20)
                recalls += 1
                results += len(response.results)
                records = [r.memory for r in response.results]
                records += memory.list(limit=20, tags=[f"t{topic}"])
                lists += 1
                partial += [r.id for r in records if not whole(r)]
                count = memory.count()
                if count < last_count:
                    errors.append(f"count went down from {last_count} to {count}")
                last_count = count
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            time.sleep(READ_PAUSE_S)
        retries = memory.store.health()["busy_retries"]
    return {
        "recalls": recalls,
        "lists": lists,
        "results": results,
        "partial": partial,
        "errors": errors,
        "retries": retries,
    }


def hang(store: str, jsonl: str, marker: str, batch: int) -> None:
    from slm.copy.jsonl import import_jsonl

    _hang_inside_graph_write(marker, batch)
    with Memory(store, settings=FAKE) as memory:
        import_jsonl(memory, jsonl)


def ack(store: str) -> None:
    with Memory(store, settings=FAKE) as memory:
        for i in range(1_000_000):
            record = memory.remember(f"acknowledged write number {i}")
            print(record.id, flush=True)


def _hang_inside_graph_write(marker: str, batch: int) -> None:
    from slm.store import derived

    original = derived.insert
    calls = 0

    def insert_graph(*args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        original(*args, **kwargs)
        if calls == batch:
            Path(marker).touch()
            time.sleep(3600)

    derived.insert = insert_graph


def hang_reindex(store: str, marker: str, batch: int) -> None:
    with Memory(store, settings=FAKE) as memory:
        _hang_inside_graph_write(marker, batch)
        memory.reindex(batch=50)


class _Spy:
    """A SQLite connection that hangs right after a statement writing the ``meta`` table
    (where a profile's ranker is kept), inside its transaction."""

    def __init__(self, db: Any, marker: str) -> None:
        self._db, self._marker = db, marker

    def execute(self, sql: str, *args: Any) -> Any:
        cursor = self._db.execute(sql, *args)
        if "INTO meta" in sql and "ranker:" in str(args):
            Path(self._marker).touch()
            time.sleep(3600)
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def hang_ranker(store: str, marker: str) -> None:
    from slm.store import sqlite_conn

    original = sqlite_conn.Connection.write

    def write(self: Any, work: Any, **options: Any) -> Any:
        return original(self, lambda db: work(_Spy(db, marker)), **options)

    with Memory(store, settings=FAKE) as memory:
        sqlite_conn.Connection.write = write  # type: ignore[method-assign]
        for i in range(200):
            response = memory.recall(f"which note is about topic {i % 17}?", k=5)
            if response.results:
                first = response.results[0].memory.id
                memory.feedback(first, useful=True, query_id=response.query_id)


def hang_artefact(target: str, marker: str) -> None:
    from slm.store import files

    def replace(*args: Any) -> None:
        Path(marker).touch()
        time.sleep(3600)

    files.os.replace = replace  # type: ignore[assignment]
    files.write_private(Path(target), json.dumps({"calibration_id": "new", "pad": "x" * 50_000}))


def main(argv: list[str]) -> None:
    command, store, *rest = argv
    if command == "write":
        worker, count, rundir = int(rest[0]), int(rest[1]), Path(rest[2])
        print(json.dumps(write(store, worker, count, rundir)))
    elif command == "read":
        print(json.dumps(read(store, int(rest[0]), Path(rest[1]))))
    elif command == "hang":
        hang(store, rest[0], rest[1], int(rest[2]))
    elif command == "ack":
        ack(store)
    elif command == "hang-reindex":
        hang_reindex(store, rest[0], int(rest[1]))
    elif command == "hang-ranker":
        hang_ranker(store, rest[0])
    elif command == "hang-artefact":
        hang_artefact(store, rest[0])
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
