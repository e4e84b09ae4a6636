"""Recalls at once: the throughput of one ``Memory`` asked by several threads together,
against the same questions asked one by one (``slm bench scale`` runs it on its store).

On a small machine the question's embedding and the rest of a recall can overlap across
threads: the model runs outside Python's lock, and questions waiting together share a
model run (``slm.embed.questions``). What stays serial is the Python of each recall.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

#: Threads asking at once (the issue's measure: four threads on two cores).
THREADS = 4

Q = TypeVar("Q")


def at_once(
    ask: Callable[[Q], list[str]], questions: Sequence[Q], threads: int = THREADS
) -> dict[str, Any]:
    """Recalls per second with one thread and with ``threads``, their ratio, and whether
    every recall made at once returned the ids it returned alone (``ask``: the result ids
    of one question)."""
    start = time.perf_counter()
    alone = [ask(q) for q in questions]
    one = len(questions) / (time.perf_counter() - start)
    with ThreadPoolExecutor(threads, thread_name_prefix="slm-bench-ask") as pool:
        list(pool.map(lambda _: None, range(threads)))  # the threads start before the clock
        start = time.perf_counter()
        together = list(pool.map(ask, questions))
        many = len(questions) / (time.perf_counter() - start)
    return {
        "threads": threads,
        "recalls_per_s_one": round(one, 1),
        "recalls_per_s_together": round(many, 1),
        "throughput_ratio": round(many / one, 3),
        "same_results_together": together == alone,
    }
