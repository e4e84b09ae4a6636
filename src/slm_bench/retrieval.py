"""Retrieval quality on any conversation set in the generic layout (BENCHMARK.md section 3).

The layout is one JSON file::

    {"name", "source", "instances": [{"id", "memories": [{"id", "content", "event_time",
     "source"}], "questions": [{"id", "question", "evidence_ids", "type", "answerable"}]}]}

One fresh store per instance; every memory stored through the public bulk API with its
event time and source, its id kept in metadata. Questions with ``answerable: true`` and
evidence are scored (hit@k, recall@k, MRR@10, overall and per ``type``); questions with
``answerable: false`` measure abstention (rate, and AUROC of the top relevance_score
against the scored questions of the same store). A question's "now" is its instance's
latest event time. A memory the engine refuses (over the size limit, say) is not stored:
the report counts such memories, gives their ids and the engine's reason, and the
questions whose evidence they were still count (as misses where nothing else is found).
Then the first answerable questions are asked again, each right after storing one more
memory of the next instance (``slm_bench.report.after_writes``: recall between writes).
"""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slm import validate
from slm.channels import enabled
from slm.embed import make_embedder
from slm.engine import Memory, MemoryInput
from slm.errors import InvalidInput
from slm.settings import Settings
from slm_bench.report import (
    Answer,
    ablation,
    ablation_table,
    abstention,
    after_write_latency,
    after_writes,
    ask,
    by_kind,
    configurations,
    fresh_store,
    latency,
    latency_line,
    step_latency,
    steps,
    summarise,
    table_head,
    table_row,
)

#: Memories stored per ``remember_many`` call while loading an instance.
BATCH = 500


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    text: str
    kind: str
    evidence: frozenset[str]
    answerable: bool


@dataclass(frozen=True, slots=True)
class Instance:
    id: str
    memories: tuple[MemoryInput, ...]
    questions: tuple[Question, ...]
    now: datetime


def _required(item: Any, key: str, where: str) -> Any:
    if not isinstance(item, dict) or key not in item:
        raise InvalidInput(f"{where}: '{key}' is missing")
    return item[key]


def _memory(raw: Any, where: str) -> MemoryInput:
    ident = str(_required(raw, "id", where))
    return MemoryInput(
        content=_required(raw, "content", where),
        event_time=raw.get("event_time"),
        source=raw.get("source"),
        metadata={"id": ident},
    )


def _question(raw: Any, where: str) -> Question:
    evidence = raw.get("evidence_ids") or [] if isinstance(raw, dict) else []
    if not isinstance(evidence, list):
        raise InvalidInput(f"{where}: 'evidence_ids' must be a list")
    return Question(
        id=str(raw.get("id", where)),
        text=str(_required(raw, "question", where)),
        kind=str(raw.get("type") or "untyped"),
        evidence=frozenset(str(e) for e in evidence),
        answerable=bool(raw.get("answerable", True)),
    )


def load(path: str | Path) -> tuple[str, list[Instance]]:
    """The data set's name and its instances; a file not in the layout is refused with the
    place where it departs from it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"cannot read {path}: {exc}") from None
    instances = _required(data, "instances", str(path))
    if not isinstance(instances, list):
        raise InvalidInput(f"{path}: 'instances' must be a list")
    out = []
    for i, raw in enumerate(instances):
        where = f"{path}: instance {i}"
        ident = str(_required(raw, "id", where))
        memories = tuple(
            _memory(m, f"{where}, memory {j}")
            for j, m in enumerate(_required(raw, "memories", where))
        )
        questions = tuple(
            _question(q, f"{where}, question {j}")
            for j, q in enumerate(_required(raw, "questions", where))
        )
        times = [
            moment
            for m in memories
            if (moment := validate.timestamp(m.event_time, "event_time")) is not None
        ]
        now = max(times) if times else datetime.now(UTC)
        out.append(Instance(ident, memories, questions, now))
    return str(data.get("name") or Path(path).stem), out


@dataclass
class Refused:
    """Memories the engine would not store, by reason."""

    ids: dict[str, list[str]]

    def count(self) -> int:
        return sum(len(ids) for ids in self.ids.values())


def store_all(
    memory: Memory, items: Sequence[MemoryInput], refused: Refused, id_key: str = "id"
) -> dict[str, str]:
    """Store ``items`` in batches; items the engine refuses are left out and recorded.
    Returns stored memory id -> the data set's id (``metadata[id_key]``)."""
    accepted = []
    for item in items:
        try:
            memory.validate_item(item)
        except InvalidInput as exc:
            refused.ids.setdefault(str(exc), []).append(str(item.metadata[id_key]))  # type: ignore[index]
            continue
        accepted.append(item)
    ids: dict[str, str] = {}
    for start in range(0, len(accepted), BATCH):
        for record in memory.remember_many(accepted[start : start + BATCH]):
            ids[record.id] = str(record.metadata[id_key])
    return ids


def run(
    path: str | Path,
    *,
    dsn: str | None = None,
    settings: Settings | None = None,
    channels: Sequence[str] | None = None,
    ablate: bool = False,
    instances: int | None = None,
    questions: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the benchmark and return the report (see the module docstring)."""
    settings = settings or Settings.from_env(calibration=None)
    name, data = load(path)
    data = data[:instances] if instances else data
    base = tuple(channels) if channels else enabled(settings)
    configs = configurations(base, ablate)
    positives: dict[str, list[Answer]] = defaultdict(list)
    negatives: dict[str, list[Answer]] = defaultdict(list)
    run_id, ingest_ms, stored = uuid.uuid4().hex[:8], 0.0, 0
    refused = Refused({})
    unscored = 0
    # One model per run, as in one agent process; its load counts in the first ingest.
    embedder = make_embedder(settings.embedder)
    after: list[float] = []
    split: list[dict[str, float]] = []
    for index, instance in enumerate(data):
        with fresh_store(dsn, settings, embedder, f"bench-{run_id}-{instance.id}") as memory:
            start = time.perf_counter()
            ids = store_all(memory, instance.memories, refused)
            ingest_ms += (time.perf_counter() - start) * 1000
            stored += len(ids)
            asked = instance.questions[:questions] if questions else instance.questions
            for q in asked:
                if q.answerable and not q.evidence:
                    unscored += 1
                    continue
                for config_name, config in configs.items():
                    answer = ask(memory, ids, q.text, q.kind, q.evidence, instance.now, config)
                    (positives if q.answerable else negatives)[config_name].append(answer)
            split += steps(memory, [q.text for q in asked], instance.now)
            if len(data) > 1:  # the next instance's memories arriving between questions
                texts = [q.text for q in asked if q.answerable]
                later = data[(index + 1) % len(data)].memories
                after += after_writes(memory, texts, later, instance.now)
        if progress:
            progress(f"{instance.id}: {len(ids)} memories, {len(asked)} questions")
    report: dict[str, Any] = {
        "dataset": str(path),
        "name": name,
        "store": "postgresql" if dsn else "sqlite",
        "instances": len(data),
        "memories": stored,
        "refused_memories": {"count": refused.count(), "by_reason": refused.ids},
        "answerable_without_evidence": unscored,
        "channels": list(base),
        "ingest_ms_per_memory": round(ingest_ms / max(stored, 1), 3),
        **score(positives["all"], negatives["all"]),
    }
    report["latency_ms"].update(after_write_latency(after))
    report["latency_ms"].update(step_latency(split))
    if ablate:
        report["ablation"] = ablation(positives, negatives, score)
    return report


def score(positives: Sequence[Answer], negatives: Sequence[Answer]) -> dict[str, Any]:
    return {
        "scored": len(positives),
        "overall": summarise(positives),
        "by_type": {
            kind: summarise(answers) for kind, answers in sorted(by_kind(positives).items())
        },
        "latency_ms": latency([*positives, *negatives]),
        "abstention": abstention(positives, negatives, "unanswerable questions of the same store"),
    }


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown tables."""
    refused = report["refused_memories"]
    lines = [
        f"{report['name']} retrieval, {report['instances']} instances, {report['memories']} "
        f"memories, {report['scored']} scored questions ({report['store']}; channels "
        f"{', '.join(report['channels'])})",
        "",
        *table_head(),
        table_row("overall", report["overall"]),
        *(table_row(kind, block) for kind, block in report["by_type"].items()),
    ]
    abst = report["abstention"]
    lines += [
        "",
        latency_line(report),
        f"abstention: AUROC {abst['auroc']:.3f}; abstained on {abst['negatives_abstained']:.1%} of "
        f"{abst['negatives']} unanswerable questions and {abst['positives_abstained']:.1%} of "
        "answerable ones",
        f"memories refused by the engine (not stored): {refused['count']}"
        + "".join(f"; {len(ids)} x {reason}" for reason, ids in refused["by_reason"].items()),
    ]
    if "ablation" in report:
        lines += ablation_table(report)
    return "\n".join(lines)
