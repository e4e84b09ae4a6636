"""One SQLite connection, shared by the threads of a store, with busy handling.

Several processes may use one store file at once. SQLite lets one of them write at a time;
the others are told the file is busy (``SQLITE_BUSY``, "database is locked"). SQLite's own
busy handler retries only the statement that met the lock, sleeping in steps that grow to
100 ms. Here its timeout is zero and every statement goes through :meth:`Connection.write` or
:meth:`Connection.read`, which retry a busy attempt after a short random sleep ("full
jitter": uniform in ``[0, min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2**n)]``) until
``BUSY_TIMEOUT_S`` has passed. Only then does the caller get a
:class:`~slm.errors.StoreError`.

A write is one ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction. When any statement of it
fails busy, the whole transaction is rolled back and run again from the start, so a retry
never repeats half of a write. ``retries`` counts the busy attempts that were retried.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from slm.errors import StoreError, disk_full
from slm.store.files import replacing

T = TypeVar("T")

#: How long a statement or transaction keeps retrying while the file is busy.
BUSY_TIMEOUT_S = 30.0
FIRST_BACKOFF_S = 0.0005
MAX_BACKOFF_S = 0.016
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
#: Parameters per ``IN (...)`` list: well under SQLite's limit on bound parameters.
CHUNK = 500
#: Reads go through a memory map of the database file of up to this size (SQLite caps it
#: at its build's limit, 2 GiB for Python's). A recall reads a few hundred scattered
#: pages; mapped, each costs a memory access instead of a system call and a copy (100k
#: store, 200 queries: p50 about 35 -> 31.5 ms; docs/scale.md, "Reading the file").
MMAP_BYTES = 1 << 40


def is_busy(exc: BaseException) -> bool:
    """True for "database is locked" and its relatives (any ``SQLITE_BUSY_*``/``LOCKED_*``)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _BUSY_CODES
    message = str(exc).lower()
    return "locked" in message or "busy" in message


def backoff(timeout: float | None = None) -> Iterator[None]:
    """One step per attempt, with a jittered sleep before each retry, until ``timeout``
    (default ``BUSY_TIMEOUT_S``) seconds have passed since the first attempt."""
    deadline = time.monotonic() + (BUSY_TIMEOUT_S if timeout is None else timeout)
    attempt = 0
    while True:
        yield None
        ceiling = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** min(attempt, 16))
        if time.monotonic() + ceiling > deadline:
            return
        time.sleep(random.uniform(0.0, ceiling))
        attempt += 1


class Connection:
    """A SQLite connection in WAL mode with ``synchronous=FULL``: a write is on disk (in
    the write-ahead log) when :meth:`write` returns, and survives a crash or power cut.
    A write marked not ``lasting`` (the recall log) commits under ``synchronous=NORMAL``:
    no ``fsync`` of its own, so a power cut can lose it (and only it, never a lasting
    write, whose ``fsync`` covers everything before it), and the connection is held for a
    tenth of the time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.retries = 0
        self.lock = threading.RLock()
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=0.0)
        try:
            self._pragma("PRAGMA journal_mode=WAL")
            self._pragma("PRAGMA synchronous=FULL")
            self._pragma(f"PRAGMA mmap_size={MMAP_BYTES}")
        except BaseException:
            self.db.close()
            raise

    def _pragma(self, statement: str) -> None:
        self.read(lambda db: db.execute(statement).fetchall())

    def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` (statements that only read), retrying while the file is busy."""
        with self.lock:
            for _ in backoff():
                try:
                    return work(self.db)
                except sqlite3.Error as exc:
                    if not is_busy(exc):
                        raise StoreError(f"read failed on {self.path}: {exc}") from exc
                    self.retries += 1
            raise self._still_busy("read")

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self.read(lambda db: db.execute(sql, params).fetchall())

    def data_version(self) -> int:
        """Changes whenever another connection commits to the file (not this one)."""
        return int(self.rows("PRAGMA data_version")[0][0])

    def snapshot(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` inside one read transaction: every statement sees the same commit."""

        def in_transaction(db: sqlite3.Connection) -> T:
            db.execute("BEGIN")
            try:
                return work(db)
            finally:
                db.execute("COMMIT")

        return self.read(in_transaction)

    def write(self, work: Callable[[sqlite3.Connection], T], *, lasting: bool = True) -> T:
        """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction and commit it. A busy
        failure anywhere rolls the transaction back and runs ``work`` again from the start.
        Not ``lasting``: committed without waiting for the disk (see the class)."""
        with self.lock:
            if lasting:
                return self._transaction(work)
            self._pragma("PRAGMA synchronous=NORMAL")
            try:
                return self._transaction(work)
            finally:
                self._pragma("PRAGMA synchronous=FULL")

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        for _ in backoff():
            try:
                self.db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                if not is_busy(exc):
                    raise StoreError(f"cannot start a write on {self.path}: {exc}") from exc
                self.retries += 1
                continue
            try:
                result = work(self.db)
                self.db.execute("COMMIT")
                return result
            except BaseException as exc:
                self._rollback()
                if isinstance(exc, sqlite3.Error):
                    if is_busy(exc):
                        self.retries += 1
                        continue
                    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                        raise StoreError(disk_full(self.path)) from exc
                    raise StoreError(f"write failed on {self.path}: {exc}") from exc
                raise
        raise self._still_busy("write")

    def _rollback(self) -> None:
        if self.db.in_transaction:
            # SQLite has already rolled back when a statement failed that way.
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")

    def _still_busy(self, what: str) -> StoreError:
        return StoreError(
            f"cannot {what} {self.path}: the store stayed busy (locked by another process) "
            f"for {BUSY_TIMEOUT_S:g} s"
        )

    def backup(self, target: Path) -> int:
        """Copy the database into the new file ``target`` with SQLite's online backup API
        and return how many memories the copy holds.

        The copy is one read transaction, a snapshot of the last commit, so it is consistent
        while other processes go on writing (WAL readers do not block writers). It is written
        to a new private file beside it, switched to a self-contained rollback journal, checked with
        ``PRAGMA integrity_check`` and synced, then renamed onto ``target``.
        """
        with replacing(target) as partial:
            memories = self._copy_into(partial, target)
            with open(partial, "rb") as handle:
                os.fsync(handle.fileno())
            os.replace(partial, target)
        _sync_directory(target.parent)
        return memories

    def _copy_into(self, partial: Path, target: Path) -> int:
        copy = sqlite3.connect(partial, isolation_level=None)
        try:
            self.read(lambda db: db.backup(copy))
            copy.execute("PRAGMA journal_mode=DELETE")
            # The copy is another database: indexes saved for this one must not match it.
            copy.execute(
                "UPDATE meta SET value = lower(hex(randomblob(16))) WHERE key = 'store_id'"
            )
            problems = copy.execute("PRAGMA integrity_check").fetchall()
            if problems != [("ok",)]:
                raise StoreError(f"the copy of {self.path} failed its integrity check: {problems}")
            memories = int(copy.execute("SELECT count(*) FROM memories").fetchone()[0])
        except sqlite3.Error as exc:
            raise StoreError(f"cannot back up {self.path} to {target}: {exc}") from exc
        finally:
            copy.close()
        return memories

    def close(self) -> None:
        with self.lock:
            self.db.close()


def _sync_directory(path: Path) -> None:
    """Make a rename in ``path`` durable (where the platform can open a directory)."""
    try:
        handle = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)
