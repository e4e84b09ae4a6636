"""The thread that writes the recall log: each recall's entry (what it asked and showed,
under its ``query_id``), written in batches when recalls pause.

Why not one write per recall, right after it: the write holds the store's connection,
and a thread that has taken the connection then waits for the interpreter's lock while the
next recall runs Python; the next recall then waits for the connection. Back to back on a
LoCoMo conversation that cost 0.36 ms of a 7.5 ms recall. So the writer waits until no
recall has been logged for :data:`QUIET_S`, or :data:`LONGEST_S` after the first entry
waiting, or :data:`MOST` entries, and writes everything waiting in one transaction.

:meth:`LogWriter.flush` writes at once what was submitted before it (feedback naming a
``query_id`` calls it first); :meth:`LogWriter.close` writes the rest and stops. A writer
nobody closes does the same when it is collected, or at exit: the thread works on a
:class:`_Queue` that holds no reference back to its writer (nor should ``write``, or the
owner of a ``Memory`` never closed would stay alive with its store).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence

from slm.store.base import LoggedRecall

log = logging.getLogger(__name__)

#: Write when no recall was logged for this long (seconds)...
QUIET_S = 0.01
#: ...or when the oldest entry waiting has waited this long...
LONGEST_S = 0.1
#: ...or when this many are waiting.
MOST = 64


class LogWriter:
    """Writes entries with ``write`` (which reports its own failures), in the order
    submitted, from a thread of its own started by the first entry."""

    def __init__(self, write: Callable[[Sequence[LoggedRecall]], None]) -> None:
        self._queue = _Queue(write)
        # Called once: by close(), when the writer is collected, or at exit.
        self._stop = weakref.finalize(self, self._queue.close)

    def submit(self, entry: LoggedRecall) -> None:
        self._queue.submit(entry)

    def flush(self) -> None:
        """Return once every entry submitted so far is written (or failed to be)."""
        self._queue.flush()

    def close(self) -> None:
        """Write what is waiting, then stop the thread."""
        self._stop()


class _Queue:
    """The entries waiting and the thread that writes them."""

    def __init__(self, write: Callable[[Sequence[LoggedRecall]], None]) -> None:
        self._write = write
        self._changed = threading.Condition()
        self._waiting: list[LoggedRecall] = []
        self._submitted = self._written = 0
        self._first = self._last = 0.0  # when the oldest waiting / the newest came
        self._hurry = self._closed = False
        self._thread: threading.Thread | None = None

    def submit(self, entry: LoggedRecall) -> None:
        with self._changed:
            if self._closed:
                raise RuntimeError("the recall log is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="slm-log", daemon=True)
                self._thread.start()
            self._last = time.monotonic()
            if not self._waiting:
                self._first = self._last
            self._waiting.append(entry)
            self._submitted += 1
            self._changed.notify_all()

    def flush(self) -> None:
        with self._changed:
            target = self._submitted
            if self._written >= target:
                return
            self._hurry = True
            self._changed.notify_all()
            while self._written < target and self._alive():
                self._changed.wait(0.5)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()  # (a writer collected on its own thread lets it finish alone)

    def _alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _serve(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closed:
                    self._changed.wait()
                if not self._waiting:
                    return  # closed, nothing left
                self._linger()
                batch, self._waiting = self._waiting, []
            try:
                self._write(batch)
            except Exception:  # the writer reports its own errors; this is a bug's last guard
                log.exception("slm: %d recalls not logged", len(batch))
            with self._changed:
                self._written += len(batch)
                if not self._waiting:
                    self._hurry = False
                self._changed.notify_all()

    def _linger(self) -> None:
        """Wait (holding the condition) until the waiting entries are due for writing: the
        newest :data:`QUIET_S` old, or the oldest :data:`LONGEST_S`."""
        while not (self._hurry or self._closed or len(self._waiting) >= MOST):
            due = min(self._last + QUIET_S, self._first + LONGEST_S) - time.monotonic()
            if due <= 0:
                return
            self._changed.wait(due)
