"""The recall log's writer (slm/learn/logwriter.py): entries written in order, in batches
when recalls pause, at once on flush, the rest on close or at exit."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from slm.learn import logwriter
from slm.learn.logwriter import LogWriter
from slm.store.base import LoggedRecall


def entry(n: int) -> LoggedRecall:
    return LoggedRecall(f"q{n}", n, "{}", "[]")


class Sink:
    def __init__(self, fail_first: bool = False) -> None:
        self.batches: list[list[str]] = []
        self.fail_first = fail_first
        self.lock = threading.Lock()

    def __call__(self, entries: Sequence[LoggedRecall]) -> None:
        with self.lock:
            if self.fail_first:
                self.fail_first = False
                raise RuntimeError("disk on fire")
            self.batches.append([e.query_id for e in entries])

    @property
    def written(self) -> list[str]:
        with self.lock:
            return [q for batch in self.batches for q in batch]


def test_entries_submitted_back_to_back_are_written_together_and_in_order() -> None:
    sink = Sink()
    writer = LogWriter(sink)
    for n in range(200):
        writer.submit(entry(n))
    writer.flush()
    assert sink.written == [f"q{n}" for n in range(200)]
    assert len(sink.batches) < 20  # batched, not one write per recall
    writer.close()


def test_a_pause_writes_what_waits_without_a_flush() -> None:
    sink = Sink()
    writer = LogWriter(sink)
    writer.submit(entry(1))
    deadline = time.monotonic() + 5
    while not sink.written and time.monotonic() < deadline:
        time.sleep(0.005)
    assert sink.written == ["q1"]
    writer.close()


@pytest.fixture
def lingering(monkeypatch: pytest.MonkeyPatch) -> tuple[Sink, LogWriter]:
    """A writer that waits 5 s for a pause before it writes, with what it wrote."""
    monkeypatch.setattr(logwriter, "QUIET_S", 5.0)
    monkeypatch.setattr(logwriter, "LONGEST_S", 5.0)
    sink = Sink()
    return sink, LogWriter(sink)


def test_nothing_is_written_while_recalls_keep_coming_before_the_longest_wait(
    lingering: tuple[Sink, LogWriter],
) -> None:
    sink, writer = lingering
    writer.submit(entry(1))
    time.sleep(0.1)
    assert sink.written == []  # still lingering
    writer.flush()  # feedback naming the recall does not wait for the pause
    assert sink.written == ["q1"]
    writer.close()


def test_close_writes_the_rest_and_refuses_more() -> None:
    sink = Sink()
    writer = LogWriter(sink)
    for n in range(5):
        writer.submit(entry(n))
    writer.close()
    assert sink.written == [f"q{n}" for n in range(5)]
    with pytest.raises(RuntimeError, match="closed"):
        writer.submit(entry(9))


def test_a_failed_write_loses_its_batch_not_the_writer() -> None:
    sink = Sink(fail_first=True)
    writer = LogWriter(sink)
    writer.submit(entry(1))
    writer.flush()  # returns although the write failed
    writer.submit(entry(2))
    writer.flush()
    assert sink.written == ["q2"]
    writer.close()


def test_a_process_that_never_closes_its_store_still_logs_its_recalls(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    script = f"""
import sys
from slm import Memory
from slm.embed.fake import FakeEmbedder
m = Memory({str(path)!r}, embedder=FakeEmbedder())
m.remember("Ana lives in Lisbon")
print(m.recall("Where does Ana live?").query_id)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    query_id = done.stdout.strip().splitlines()[-1]
    from slm import Memory
    from slm.embed.fake import FakeEmbedder

    with Memory(path, embedder=FakeEmbedder()) as memory:
        assert memory.learning.logged_recall(query_id).query_id == query_id


def test_a_flush_with_nothing_waiting_leaves_the_next_entries_to_batch(
    lingering: tuple[Sink, LogWriter],
) -> None:
    sink, writer = lingering
    writer.submit(entry(1))
    writer.flush()
    writer.flush()  # nothing waits: feedback on an older recall
    writer.submit(entry(2))
    time.sleep(0.1)
    assert sink.written == ["q1"]  # the second lingers for the next ones
    writer.close()
    assert sink.written == ["q1", "q2"]


def test_a_memory_nobody_closes_is_collected_and_its_log_written(tmp_path: Path) -> None:
    import gc
    import weakref

    from slm import Memory
    from slm.embed.fake import FakeEmbedder

    path = tmp_path / "m.db"
    memory = Memory(path, embedder=FakeEmbedder())
    memory.remember("Ana lives in Lisbon")
    query_id = memory.recall("Where does Ana live?").query_id
    gone = weakref.ref(memory)
    del memory
    deadline = time.monotonic() + 10
    while gone() is not None and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.01)
    assert gone() is None  # the log's thread did not keep it, nor its store
    with Memory(path, embedder=FakeEmbedder()) as again:
        assert again.learning.logged_recall(query_id).query_id == query_id
