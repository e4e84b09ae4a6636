"""Whose memory "I" is (``slm bench whose --data FILE``): users' memories written in the
first person ("I live in Porto"), each stored under its user's ``user_id``, asked about in
the third person ("Where does alice live?", "What is the user's job?") by a recall filtered
to that user, as an agent asks on behalf of the user it serves (docs/scopes.md).

A set is ``{"users": [{"user", "memories": [text, ...], "questions": [{"question",
"answer": index of the memory that answers}]}]}``; ``bench-data/whose-dev.json`` (rules
developed on it) and ``bench-data/whose-blind.json`` (never tuned on) ship with slm.
Reports hit@1, hit@5, how many recalls abstained, and hit@1 with ``min_relevance=0.5``.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slm.engine import Memory
from slm.settings import Settings

#: The minimum relevance the strict figure asks for (the README's "only strong answers").
STRONG = 0.5


def run(
    data: Path, *, settings: Settings, progress: Callable[[str], None] = lambda _: None
) -> dict[str, Any]:
    """Store every user's memories in one profile and ask each question within its user's
    scope; the figures and each question's outcome."""
    users = json.loads(Path(data).read_text(encoding="utf-8"))["users"]
    asked: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "whose.db",
                                                      settings=settings) as memory:  # fmt: skip
        ids: dict[str, list[str]] = {}
        for user in users:
            done = memory.remember_many(
                [
                    {"content": text, "metadata": {"user_id": user["user"]}}
                    for text in user["memories"]
                ]
            )
            ids[user["user"]] = [d.id for d in done]
        progress(f"stored {sum(len(v) for v in ids.values())} memories of {len(users)} users")
        started = time.perf_counter()
        for user in users:
            scope = {"user_id": user["user"]}
            for item in user["questions"]:
                answer = ids[user["user"]][item["answer"]]
                found = memory.recall(item["question"], k=5, metadata=scope)
                strong = memory.recall(item["question"], k=5, metadata=scope, min_relevance=STRONG)
                rank = found.ids.index(answer) + 1 if answer in found.ids else None
                asked.append(
                    {
                        "user": user["user"],
                        "question": item["question"],
                        "rank": rank,
                        "relevance": next(
                            (round(r.relevance_score, 3) for r in found.results if r.id == answer),
                            None,
                        ),
                        "abstained": found.abstained,
                        "strong_first": bool(strong.ids) and strong.ids[0] == answer,
                    }
                )
        elapsed = time.perf_counter() - started
    n = len(asked)
    return {
        "data": str(data),
        "questions": n,
        "hit@1": round(sum(a["rank"] == 1 for a in asked) / n, 3),
        "hit@5": round(sum(a["rank"] is not None for a in asked) / n, 3),
        "abstained": sum(a["abstained"] for a in asked),
        f"hit@1 at min_relevance {STRONG}": round(sum(a["strong_first"] for a in asked) / n, 3),
        "recall_ms_mean": round(1000 * elapsed / (2 * n), 1),
        "asked": asked,
    }


def markdown(report: dict[str, Any]) -> str:
    keys = ("questions", "hit@1", "hit@5", "abstained", f"hit@1 at min_relevance {STRONG}")
    lines = [f"{report['data']}: " + ", ".join(f"{k} {report[k]}" for k in keys)]
    lines += [
        f"  {'ok ' if a['rank'] == 1 else 'MISS'} {a['user']}: {a['question']} "
        f"(rank {a['rank']}, relevance {a['relevance']})"
        for a in report["asked"]
    ]
    return "\n".join(lines)
