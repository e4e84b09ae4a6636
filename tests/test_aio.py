"""``AsyncMemory`` and sharing one ``Memory`` between threads (issue #31), on both stores."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from store_checks import problems

from slm import AsyncMemory, Memory, Settings


def test_async_memory_runs_the_same_engine(tmp_path: Path) -> None:
    async def main() -> None:
        path = tmp_path / "async.db"
        async with await AsyncMemory.open(path, settings=Settings(embedder="fake")) as memory:
            done = await memory.remember("Priya is allergic to cats", source="chat")
            assert done.created and done.content == "Priya is allergic to cats"
            await memory.remember_many(
                [{"content": f"note {i} about the garden"} for i in range(20)]
            )
            # Several recalls at once, from one event loop.
            answers = await asyncio.gather(
                *(memory.recall(f"what about note {i}?", k=3) for i in range(8))
            )
            assert all(a.to_dict()["score_contract_version"] == "2" for a in answers)
            assert await memory.count() == 21
            assert (await memory.get(done.id)).content == done.content
            assert len(await memory.list(5)) == 5
            assert (await memory.health())["memories"] == 21
        assert memory.memory.store is not None

    asyncio.run(main())


def test_async_memory_takes_the_arguments_of_memory(tmp_path: Path) -> None:
    """``AsyncMemory(path, profile=, settings=)`` opens a store as ``Memory`` does; it used to
    take only an open ``Memory`` and failed at the first call on a path."""
    fake = Settings(embedder="fake")

    async def main() -> None:
        path = tmp_path / "direct.db"
        async with AsyncMemory(str(path), profile="work", settings=fake) as memory:
            assert memory.profile == "work"
            done = await memory.remember("Priya is allergic to cats")
            assert (await memory.recall("Priya cats", k=1)).ids == [done.id]
        async with AsyncMemory(path, profile="work", settings=fake) as again:
            assert await again.count() == 1
        with Memory(path, profile="work", settings=fake) as plain:
            wrapped = AsyncMemory(plain)
            assert wrapped.memory is plain and await wrapped.count() == 1
            with pytest.raises(TypeError, match="takes no options"):
                AsyncMemory(plain, profile="home")
        async with await AsyncMemory.open(path, profile="work", settings=fake) as opened:
            assert await opened.count() == 1

    asyncio.run(main())


def test_one_memory_shared_by_threads_loses_nothing(memory: Memory, tmp_path: Path) -> None:
    """Four threads each write 40 memories (in ones and in batches) and recall between
    writes, all through one Memory: no call fails and every write is there once."""
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def work(worker: int) -> None:
        try:
            start.wait()
            for i in range(20):
                memory.remember(f"worker {worker} note {i} about topic {i % 5}")
                memory.recall(f"which note is about topic {i % 5}?", k=5)
            memory.remember_many(
                [{"content": f"worker {worker} batch note {i}"} for i in range(20)]
            )
            memory.list(10)
        except BaseException as exc:  # every failure is reported
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == []
    assert memory.count() == 4 * 40
    contents = {r.content for r in memory.list(1000)}
    assert len(contents) == 160
    if memory.store.kind == "sqlite":
        assert problems(Path(memory.store.location)) == []
