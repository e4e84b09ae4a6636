"""The open :class:`~slm.Memory` objects of a server, one per profile, shared by the
requests that name it (``slm serve``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from slm.embed import Embedder
from slm.engine import Memory
from slm.settings import Settings
from slm.store import Location


class Profiles:
    """One open :class:`Memory` per profile, all over one store file and one embedder.

    At most ``limit`` stay open; the least recently used idle one is closed to make room,
    and one evicted while a request still uses it is closed when that request ends.
    """

    def __init__(self, location: Location, settings: Settings, limit: int = 32) -> None:
        self.location, self.settings, self.limit = location, settings, limit
        self._lock = threading.Lock()
        self._open: OrderedDict[str, Memory] = OrderedDict()
        self._users: dict[int, int] = {}
        self._embedder: Embedder | None = None
        #: the store's location as its errors name it (a file's path, a server's address)
        self._where: str | None = None

    @contextmanager
    def lease(self, profile: str) -> Iterator[Memory]:
        memory = self._acquire(profile)
        try:
            yield memory
        finally:
            self._release(memory)

    def _acquire(self, profile: str) -> Memory:
        with self._lock:
            memory = self._open.get(profile)
            if memory is None:
                memory = Memory(
                    self.location,
                    profile=profile,
                    settings=self.settings,
                    embedder=self._embedder,
                )
                self._embedder = memory.embedder  # loading the model once is enough
                self._where = memory.location
                self._open[profile] = memory
                self._evict()
            self._open.move_to_end(profile)
            self._users[id(memory)] = self._users.get(id(memory), 0) + 1
            return memory

    def _release(self, memory: Memory) -> None:
        with self._lock:
            left = self._users[id(memory)] = self._users[id(memory)] - 1
            if left == 0:
                del self._users[id(memory)]
                if self._open.get(memory.profile) is not memory:
                    memory.close()

    def _evict(self) -> None:
        for profile in list(self._open)[: max(0, len(self._open) - self.limit)]:
            memory = self._open.pop(profile)
            if id(memory) not in self._users:
                memory.close()

    def public(self, message: str) -> str:
        """``message`` as a server may answer it: with "the store" where it names the store's
        file or server, which a client has no use for and should not learn from an error."""
        return message.replace(self._where, "the store") if self._where else message

    def close(self) -> None:
        with self._lock:
            for memory in self._open.values():
                memory.close()
            self._open.clear()
