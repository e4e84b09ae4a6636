"""What the retrieval benchmarks share: one answer per asked question, its metrics by slice,
the abstention check, the paired comparison of two configurations, and the Markdown tables.

``slm_bench.locomo`` and ``slm_bench.retrieval`` differ only in how they read their data.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from slm.embed import Embedder
from slm.engine import Memory, MemoryInput
from slm.errors import InvalidInput
from slm.settings import Settings
from slm_bench.metrics import auroc, hit_at, mcnemar_p, percentile, recall_at, reciprocal_rank

K = 10
#: Questions per store asked again right after storing one more memory each (another
#: conversation's): recall as an agent sees it, between its writes (:func:`after_writes`).
AFTER_WRITES = 50
COLUMNS = ("hit@1", "hit@5", "hit@10", "recall@10", "mrr@10")


@dataclass(frozen=True, slots=True)
class Answer:
    """One recall of one question under one channel configuration: the benchmark's own ids
    of the returned memories, best first."""

    kind: str
    ranked: tuple[str, ...]
    evidence: frozenset[str]
    top_relevance: float
    abstained: bool
    ms: float
    #: the question's embedding alone, timed right after the recall: a recall's floor
    embed_ms: float = 0.0


def ask(
    memory: Memory,
    ids: dict[str, str],
    question: str,
    kind: str,
    evidence: frozenset[str],
    now: datetime,
    channels: Sequence[str],
) -> Answer:
    """Recall the top ``K`` for ``question``, timed around the public call, then the
    question's embedding alone in the same way (the floor of any recall); ``ids`` maps
    stored memory ids to the benchmark's ids."""
    start = time.perf_counter()
    response = memory.recall(question, k=K, channels=channels, now=now)
    elapsed = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    memory.embedder.embed_batch([question])
    embedded = (time.perf_counter() - start) * 1000
    ranked = tuple(ids.get(r.memory.id, "") for r in response.results)
    top = response.results[0].relevance_score if response.results else 0.0
    return Answer(kind, ranked, evidence, top, response.abstained, elapsed, embedded)


@contextmanager
def fresh_store(
    dsn: str | None, settings: Settings, embedder: Embedder, name: str
) -> Iterator[Memory]:
    """A new, empty store for one conversation: a profile named ``name`` on the PostgreSQL
    server at ``dsn``, or a SQLite file in a temporary directory (removed afterwards)."""
    profile = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64]
    if dsn is not None:
        with Memory(dsn=dsn, profile=profile, settings=settings, embedder=embedder) as memory:
            yield memory
        return
    with (
        tempfile.TemporaryDirectory(prefix="slm-bench-") as tmp,
        Memory(
            Path(tmp) / "bench.db", profile=profile, settings=settings, embedder=embedder
        ) as memory,
    ):
        yield memory


def summarise(answers: Sequence[Answer]) -> dict[str, float | int]:
    n = len(answers)
    if not n:
        return {"n": 0}
    out: dict[str, float | int] = {"n": n}
    for k in (1, 5, 10):
        out[f"hit@{k}"] = sum(hit_at(a.ranked, set(a.evidence), k) for a in answers) / n
    for k in (1, 5, 10):
        out[f"recall@{k}"] = sum(recall_at(a.ranked, set(a.evidence), k) for a in answers) / n
    out["mrr@10"] = sum(reciprocal_rank(a.ranked, set(a.evidence), K) for a in answers) / n
    out["abstained"] = sum(a.abstained for a in answers)
    out["fewer_than_10"] = sum(len(a.ranked) < K for a in answers)
    return {key: round(v, 4) if isinstance(v, float) else v for key, v in out.items()}


def by_kind(answers: Iterable[Answer]) -> dict[str, list[Answer]]:
    grouped: dict[str, list[Answer]] = defaultdict(list)
    for answer in answers:
        grouped[answer.kind].append(answer)
    return grouped


def abstention(scored: Sequence[Answer], negatives: Sequence[Answer], what: str) -> dict[str, Any]:
    """How well the top ``relevance_score`` tells the scored questions from ``negatives``
    (questions whose answer is not in the store): AUROC and abstention rates."""
    return {
        "auroc": round(
            auroc([a.top_relevance for a in scored], [a.top_relevance for a in negatives]), 4
        ),
        "negatives": len(negatives),
        "negatives_are": what,
        "negatives_abstained": round(
            sum(a.abstained for a in negatives) / max(len(negatives), 1), 4
        ),
        "positives_abstained": round(sum(a.abstained for a in scored) / max(len(scored), 1), 4),
    }


def latency(answers: Sequence[Answer]) -> dict[str, float]:
    """Recall p50 and p95, and the same of the questions' embeddings alone (``embed_p50``,
    ``embed_p95``): the floor a recall cannot go under, measured in the same run."""
    times, floor = [a.ms for a in answers], [a.embed_ms for a in answers]
    return {
        "p50": round(percentile(times, 50), 3),
        "p95": round(percentile(times, 95), 3),
        "embed_p50": round(percentile(floor, 50), 3),
        "embed_p95": round(percentile(floor, 95), 3),
    }


def after_writes(
    memory: Memory,
    questions: Sequence[str],
    items: Sequence[MemoryInput | Mapping[str, Any]],
    now: datetime,
) -> list[float]:
    """As an agent does between questions: store one of ``items`` (untimed), then recall one
    of ``questions``, timed as :func:`ask` times it (an item the engine refuses is passed
    over). Its ms per question; run after every scored question, as it adds memories."""
    accepted: list[MemoryInput | Mapping[str, Any]] = []
    for item in items:
        if len(accepted) == min(AFTER_WRITES, len(questions)):
            break
        with contextlib.suppress(InvalidInput):
            memory.validate_item(item)
            accepted.append(item)
    times = []
    for question, item in zip(questions, accepted, strict=False):
        memory.remember_many([item])
        start = time.perf_counter()
        memory.recall(question, k=K, now=now)
        times.append((time.perf_counter() - start) * 1000)
    return times


def steps(memory: Memory, questions: Sequence[str], now: datetime) -> list[dict[str, float]]:
    """Each of ``questions`` recalled once more, with a trace: where its time went, step by
    step (the trace's ``timings_ms``). Not timed itself (building the trace costs more)."""
    return [
        dict((memory.recall(question, k=K, now=now, trace=True).trace or {})["timings_ms"])
        for question in questions
    ]


def step_latency(timings: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """The p50 of each step of :func:`steps` (``latency_ms.steps_p50``), in recall order."""
    names = list(dict.fromkeys(name for t in timings for name in t))
    if not names:
        return {}
    return {
        "steps_p50": {
            name: round(percentile([t.get(name, 0.0) for t in timings], 50), 3) for name in names
        }
    }


def steps_text(split: Mapping[str, float]) -> str:
    """Each step's milliseconds (:func:`step_latency`), in one line."""
    return ", ".join(f"{name} {ms:.2f}" for name, ms in split.items())


def steps_line(report: Mapping[str, Any]) -> str | None:
    """The p50 of each step of a recall, in one line (None when not measured)."""
    split = report["latency_ms"].get("steps_p50")
    if not split:
        return None
    return "where a recall goes, p50 of each step (ms): " + steps_text(split)


def after_write_latency(times: Sequence[float]) -> dict[str, float]:
    """The latency fields of :func:`after_writes` (none when nothing was asked)."""
    if not times:
        return {}
    return {
        "after_write_p50": round(percentile(times, 50), 3),
        "after_write_p95": round(percentile(times, 95), 3),
    }


def latency_line(report: Mapping[str, Any]) -> str:
    """Recall latency, its multiple of the question's embedding, and ingest, in one line."""
    lat = report["latency_ms"]
    multiple = lat["p50"] / lat["embed_p50"] if lat["embed_p50"] else float("nan")
    after = lat.get("after_write_p50")
    return (
        f"latency p50 {lat['p50']:.1f} ms, p95 {lat['p95']:.1f} ms (the question's embedding "
        f"alone p50 {lat['embed_p50']:.1f} ms: recall {multiple:.2f}x"
        + (f"; right after storing a memory p50 {after:.1f} ms" if after is not None else "")
        + f"); ingest {report['ingest_ms_per_memory']:.2f} ms/memory"
        + (f"\n{split}" if (split := steps_line(report)) else "")
    )


def paired(base: Sequence[Answer], other: Sequence[Answer]) -> dict[str, float | int]:
    """Question by question against ``base`` (the same scored questions, asked in the same
    order): how many ``other`` loses (hit@10 in ``base`` only) and gains, and the exact
    McNemar p-value of that split. A large p means the difference could be chance."""
    lost = gained = 0
    for a, b in zip(base, other, strict=True):
        was, now = hit_at(a.ranked, set(a.evidence), K), hit_at(b.ranked, set(b.evidence), K)
        lost += was > now
        gained += now > was
    return {"lost": lost, "gained": gained, "p": round(mcnemar_p(gained, lost), 4)}


def configurations(channels: Sequence[str], ablate: bool) -> dict[str, tuple[str, ...]]:
    """``"all"``: ``channels``; with ``ablate``, also each of them switched off in turn."""
    configs = {"all": tuple(channels)}
    if ablate:
        configs.update({f"without {c}": tuple(x for x in channels if x != c) for c in channels})
    return configs


def ablation(
    positives: Mapping[str, Sequence[Answer]],
    negatives: Mapping[str, Sequence[Answer]],
    score: Callable[[Sequence[Answer], Sequence[Answer]], dict[str, Any]],
    scored: Callable[[Sequence[Answer]], Sequence[Answer]] = list,
) -> dict[str, Any]:
    """The report of every configuration but ``"all"``, each with its paired comparison to
    ``"all"`` over the ``scored`` answers."""
    return {
        name: {
            **score(answers, negatives[name]),
            "paired_hit@10": paired(scored(positives["all"]), scored(answers)),
        }
        for name, answers in positives.items()
        if name != "all"
    }


def table_row(name: str, block: dict[str, Any]) -> str:
    return (
        f"| {name} | {block.get('n', 0)} | "
        + " | ".join(f"{block.get(c, float('nan')):.3f}" for c in COLUMNS)
        + " |"
    )


def table_head() -> list[str]:
    return ["| slice | n | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]


def ablation_table(report: dict[str, Any]) -> list[str]:
    """One line per configuration: the overall metrics, AUROC and the paired change."""
    lines = [
        "",
        "| configuration | "
        + " | ".join(COLUMNS)
        + " | AUROC | hit@10 questions lost / gained (McNemar p) |",
        "|---|" + "---|" * (len(COLUMNS) + 2),
    ]
    blocks = {"all channels": report, **report["ablation"]}
    for name, block in blocks.items():
        values = " | ".join(f"{block['overall'].get(c, float('nan')):.3f}" for c in COLUMNS)
        pair = block.get("paired_hit@10")
        change = f"{pair['lost']} / {pair['gained']} ({pair['p']:.3f})" if pair else ""
        lines.append(f"| {name} | {values} | {block['abstention']['auroc']:.3f} | {change} |")
    return lines
