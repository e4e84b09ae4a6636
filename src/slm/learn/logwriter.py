"""The thread that writes the recall log: each recall's entry (what it asked and showed,
under its ``query_id``), written in batches when recalls pause.

Why not one write per recall, right after it: the write holds the store's connection,
and a thread that has taken the connection then waits for the interpreter's lock while the
next recall runs Python; the next recall then waits for the connection. Back to back on a
LoCoMo conversation that cost 0.36 ms of a 7.5 ms recall. So the writer waits until no
recall has been logged for :data:`QUIET_S`, or :data:`LONGEST_S` after the first entry
waiting, or :data:`MOST` entries, and writes everything waiting in one transaction.

:meth:`LogWriter.flush` writes at once what was submitted before it (feedback naming a
``query_id`` calls it first); :meth:`LogWriter.close` writes the rest and stops. The
entries of a process that ends without closing its ``Memory`` are written at exit.
"""

from __future__ import annotations

import atexit
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

_OPEN: weakref.WeakSet[LogWriter] = weakref.WeakSet()


class LogWriter:
    """Writes entries with ``write`` (which reports its own failures), in the order
    submitted, from a thread of its own."""

    def __init__(self, write: Callable[[Sequence[LoggedRecall]], None]) -> None:
        self._write = write
        self._changed = threading.Condition()
        self._waiting: list[LoggedRecall] = []
        self._submitted = self._written = 0
        self._last = 0.0
        self._hurry = self._closed = False
        self._thread = threading.Thread(target=self._serve, name="slm-log", daemon=True)
        self._thread.start()
        _OPEN.add(self)

    def submit(self, entry: LoggedRecall) -> None:
        with self._changed:
            if self._closed:
                raise RuntimeError("the recall log is closed")
            self._waiting.append(entry)
            self._submitted += 1
            self._last = time.monotonic()
            self._changed.notify_all()

    def flush(self) -> None:
        """Return once every entry submitted so far is written (or failed to be)."""
        with self._changed:
            target = self._submitted
            self._hurry = True
            self._changed.notify_all()
            while self._written < target and self._thread.is_alive():
                self._changed.wait(0.5)

    def close(self) -> None:
        """Write what is waiting, then stop the thread."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join()
        _OPEN.discard(self)

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
        """Wait (holding the condition) until the waiting entries are due for writing."""
        first = time.monotonic()
        while not (self._hurry or self._closed or len(self._waiting) >= MOST):
            due = min(self._last + QUIET_S, first + LONGEST_S) - time.monotonic()
            if due <= 0:
                return
            self._changed.wait(due)


@atexit.register
def _write_at_exit() -> None:
    for writer in list(_OPEN):
        writer.close()
