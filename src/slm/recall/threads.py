"""Native thread pools (BLAS, OpenMP) held to one thread while a recall runs.

A recall's numerical work is small (a few hundred vectors at a time, one faiss query), far too
small to gain from BLAS or OpenMP threads, but those pools keep their threads spinning after
each call and take the cores the embedding model needs. On the 2-core benchmark machine,
one thread for these pools took recall p50 from 47.6 to 28.7 ms at 10k memories and from 39
to 33 ms at 1M (measured with the pools set to one thread for the whole process; with this
module, 28.8 ms at 10k; docs/benchmarks.md). Ingest keeps them: faiss adds vectors in parallel.
The limit is process-wide while it is held (these pools have no per-thread setting).
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any, cast

from threadpoolctl import ThreadpoolController

_lock = threading.Lock()
_controller: Any = None


def single_threaded() -> AbstractContextManager[object]:
    """A context in which the loaded BLAS and OpenMP libraries use one thread."""
    global _controller
    with _lock:
        if _controller is None:  # finding the libraries takes a few milliseconds: once
            _controller = ThreadpoolController()
        return cast(AbstractContextManager[object], _controller.limit(limits=1))
