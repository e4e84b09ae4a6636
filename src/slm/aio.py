"""``AsyncMemory``: :class:`slm.Memory`'s API for asyncio code, over the one engine.

Each method runs the same :class:`Memory` method in a worker thread (``asyncio.to_thread``),
so an event loop never blocks on embedding a question or on the store, and there is no
second copy of any logic. A :class:`Memory` may be shared by threads: its store serialises
writes (one connection and lock for SQLite, a pool and per-profile locks for PostgreSQL)
and its model sessions are safe to call at once (``tests/test_aio.py`` runs recalls and
writes from several threads and tasks together).

    async with await AsyncMemory.open("notes.db") as memory:
        await memory.remember("Priya is allergic to cats")
        response = await memory.recall("Which pets should we avoid around Priya?")

``AsyncMemory("notes.db")`` opens the store as ``Memory("notes.db")`` does, on the calling
thread (loading the model takes a moment: inside a running event loop, ``open`` keeps it
off the loop); ``AsyncMemory(memory)`` wraps a :class:`Memory` already open.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from slm.embed import Embedder
from slm.engine import Memory
from slm.settings import Settings
from slm.store import Location

P = ParamSpec("P")
T = TypeVar("T")


def _threaded(
    method: Callable[Concatenate[Memory, P], T],
) -> Callable[Concatenate[AsyncMemory, P], Coroutine[Any, Any, T]]:
    """``method`` of :class:`Memory` as a coroutine method of :class:`AsyncMemory`."""

    async def call(self: AsyncMemory, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.to_thread(method, self.memory, *args, **kwargs)

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call


class AsyncMemory:
    """A :class:`Memory` for asyncio: the same methods, awaited. It takes
    :class:`Memory`'s arguments, or a :class:`Memory` already open. ``memory`` is the
    synchronous object underneath, usable from threads alongside."""

    def __init__(
        self,
        path: Memory | str | Path | Location | None = None,
        *,
        dsn: str | None = None,
        profile: str = "default",
        settings: Settings | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        if isinstance(path, Memory):
            if (dsn, profile, settings, embedder) != (None, "default", None, None):
                raise TypeError("AsyncMemory(memory) wraps an open Memory: it takes no options")
            self.memory = path
        else:
            self.memory = Memory(
                path, dsn=dsn, profile=profile, settings=settings, embedder=embedder
            )

    @classmethod
    async def open(cls, *args: Any, **kwargs: Any) -> AsyncMemory:
        """``AsyncMemory(*args, **kwargs)``, opened off the event loop (loading the model
        takes a moment)."""
        return await asyncio.to_thread(cls, *args, **kwargs)

    @property
    def profile(self) -> str:
        return self.memory.profile

    remember = _threaded(Memory.remember)
    remember_many = _threaded(Memory.remember_many)
    remember_conversation = _threaded(Memory.remember_conversation)
    store_many = _threaded(Memory.store_many)
    update = _threaded(Memory.update)
    unlink = _threaded(Memory.unlink)
    recall = _threaded(Memory.recall)
    recall_request = _threaded(Memory.recall_request)
    get = _threaded(Memory.get)
    history = _threaded(Memory.history)
    list = _threaded(Memory.list)
    count = _threaded(Memory.count)
    forget = _threaded(Memory.forget)
    feedback = _threaded(Memory.feedback)
    feedback_report = _threaded(Memory.feedback_report)
    feedback_events = _threaded(Memory.feedback_events)
    reset_feedback = _threaded(Memory.reset_feedback)
    reindex = _threaded(Memory.reindex)
    health = _threaded(Memory.health)
    close = _threaded(Memory.close)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.close()
