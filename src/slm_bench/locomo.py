"""The LoCoMo retrieval benchmark (protocol: BENCHMARK.md section 1; docs/benchmarks.md).

One fresh store per conversation; one memory per turn (``"{speaker}: {text}"`` plus
``" [image: {caption}]"``), event time = the session's date, ``dia_id`` in metadata, stored
through the public bulk API. Every question of categories 1-4 is asked with default
settings and top 10 scored against its cleaned evidence ids; category 5 is reported apart.
Abstention is checked by asking each store the questions of another conversation.
Relative time in questions is resolved against the conversation's last session date.
Then, as an agent stores something between its questions, the first questions are asked
again, each right after storing one more turn of the next conversation
(``slm_bench.report.after_writes``, ``latency_ms.after_write_p50``; the scored figures are
taken before).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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

SCORED_CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
_SCORED_KINDS = frozenset(str(c) for c in SCORED_CATEGORIES)
_DIA = re.compile(r"D(\d+):(\d+)")
_MONTHS = (
    "january february march april may june july august september october november december"
).split()
_STAMP = re.compile(
    r"(?P<h>\d{1,2}):(?P<mi>\d{2}) ?(?P<ap>am|pm) on (?P<d>\d{1,2}) (?P<mon>[a-z]+)\.?,? "
    r"(?P<y>\d{4})",
    re.IGNORECASE,
)


def parse_locomo_datetime(text: str) -> datetime:
    """LoCoMo's session stamp, e.g. "1:56 pm on 8 May, 2023", as UTC; ``ValueError`` for
    anything else."""
    m = _STAMP.fullmatch(" ".join(text.split()))
    if m is None:
        raise ValueError(f"not a LoCoMo datetime: {text[:80]!r}")
    hour, minute = int(m.group("h")), int(m.group("mi"))
    month = m.group("mon").lower()
    matching = [i for i, name in enumerate(_MONTHS, start=1) if name.startswith(month[:3])]
    if not 1 <= hour <= 12 or minute > 59 or not matching or len(month) < 3:
        raise ValueError(f"bad date or time in {text[:80]!r}")
    if month not in (_MONTHS[matching[0] - 1], _MONTHS[matching[0] - 1][:3]):
        raise ValueError(f"unknown month in {text[:80]!r}")
    hour = hour % 12 + (12 if m.group("ap").lower() == "pm" else 0)
    return datetime(int(m.group("y")), matching[0], int(m.group("d")), hour, minute, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    turns: tuple[MemoryInput, ...]
    questions: tuple[Question, ...]
    last_time: datetime


@dataclass
class Cleaning:
    evidence_ids_dropped: int = 0
    questions_without_evidence: int = 0


def clean_evidence(raw: Sequence[object], cleaning: Cleaning) -> frozenset[str]:
    """Split joined ids, normalise ``D30:05`` to ``D30:5``, drop malformed ones."""
    ids: set[str] = set()
    for item in raw:
        for part in re.split(r"[;\s]+", str(item)):
            if not part:
                continue
            match = _DIA.fullmatch(part)
            if match is None:
                cleaning.evidence_ids_dropped += 1
                continue
            ids.add(f"D{int(match.group(1))}:{int(match.group(2))}")
    return frozenset(ids)


def _turns(sample: dict[str, Any]) -> Iterator[tuple[int, datetime, dict[str, Any]]]:
    conversation = sample["conversation"]
    numbers = sorted(
        int(m.group(1))
        for key in conversation
        if (m := re.fullmatch(r"session_(\d+)", key)) and conversation[key]
    )
    for number in numbers:
        when = parse_locomo_datetime(conversation[f"session_{number}_date_time"])
        for turn in conversation[f"session_{number}"]:
            yield number, when, turn


def load(path: str | Path) -> tuple[list[Conversation], Cleaning]:
    """Conversations in the original LoCoMo JSON layout, with evidence cleaned."""
    try:
        samples = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"cannot read LoCoMo data from {path}: {exc}") from None
    cleaning = Cleaning()
    conversations = []
    for sample in samples:
        turns, last = [], None
        for session, when, turn in _turns(sample):
            content = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                content += f" [image: {turn['blip_caption']}]"
            metadata = {
                "dia_id": turn["dia_id"],
                "session": session,
                "conversation": sample["sample_id"],
            }
            turns.append(
                MemoryInput(content, event_time=when, source=turn["speaker"], metadata=metadata)
            )
            last = when
        questions = []
        for qa in sample.get("qa", []):
            evidence = clean_evidence(qa.get("evidence", []), cleaning)
            if not evidence:
                cleaning.questions_without_evidence += 1
                continue
            questions.append(Question(str(qa["question"]), evidence, int(qa["category"])))
        if last is not None:
            conversations.append(
                Conversation(sample["sample_id"], tuple(turns), tuple(questions), last)
            )
    return conversations, cleaning


def _scored(answers: Sequence[Answer]) -> list[Answer]:
    return [a for a in answers if a.kind in _SCORED_KINDS]


def score(positives: Sequence[Answer], negatives: Sequence[Answer]) -> dict[str, Any]:
    scored = _scored(positives)
    grouped = by_kind(positives)
    return {
        "scored": len(scored),
        "overall": summarise(scored),
        "by_category": {
            str(c): {"name": CATEGORY_NAMES[c], **summarise(grouped[str(c)])}
            for c in SCORED_CATEGORIES
        },
        "adversarial": summarise(grouped["5"]),
        "latency_ms": latency([*positives, *negatives]),
        "abstention": abstention(scored, negatives, "questions of another conversation"),
    }


def run(
    path: str | Path,
    *,
    dsn: str | None = None,
    settings: Settings | None = None,
    channels: Sequence[str] | None = None,
    ablate: bool = False,
    conversations: int | None = None,
    questions: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the benchmark and return the report (see the module docstring)."""
    settings = settings or Settings.from_env(calibration=None)
    data, cleaning = load(path)
    data = data[:conversations] if conversations else data
    base = tuple(channels) if channels else enabled(settings)
    configs = configurations(base, ablate)
    positives: dict[str, list[Answer]] = defaultdict(list)
    negatives: dict[str, list[Answer]] = defaultdict(list)
    run_id, ingest_ms, memories = uuid.uuid4().hex[:8], 0.0, 0
    after: list[float] = []
    split: list[dict[str, float]] = []
    # One model per run, as in one agent process; its load counts in the first ingest.
    embedder = make_embedder(settings.embedder)
    for index, conv in enumerate(data):
        other = data[(index + 1) % len(data)] if len(data) > 1 else None
        name = f"locomo-{run_id}-{conv.sample_id}"
        with fresh_store(dsn, settings, embedder, name) as memory:
            start = time.perf_counter()
            records = memory.remember_many(conv.turns)
            ingest_ms += (time.perf_counter() - start) * 1000
            memories += len(records)
            dia = {r.id: str(r.metadata["dia_id"]) for r in records}
            asked = conv.questions[:questions] if questions else conv.questions
            foreign = [
                q for q in (other.questions if other else ()) if q.category in SCORED_CATEGORIES
            ]
            foreign = foreign[:questions] if questions else foreign
            for name, config in configs.items():
                for q in asked:
                    positives[name].append(_ask(memory, dia, q, conv.last_time, config))
                for q in foreign:
                    negatives[name].append(_ask(memory, dia, q, conv.last_time, config))
            split += steps(memory, [q.text for q in asked], conv.last_time)
            if other is not None:  # the next conversation's turns arriving between questions
                texts = [q.text for q in asked]
                after += after_writes(memory, texts, other.turns, conv.last_time)
        if progress:
            progress(f"{conv.sample_id}: {len(records)} memories, {len(asked)} questions")
    report: dict[str, Any] = {
        "dataset": str(path),
        "store": "postgresql" if dsn else "sqlite",
        "conversations": len(data),
        "memories": memories,
        "channels": list(base),
        "cleaning": {
            "evidence_ids_dropped": cleaning.evidence_ids_dropped,
            "questions_without_evidence": cleaning.questions_without_evidence,
        },
        "ingest_ms_per_memory": round(ingest_ms / max(memories, 1), 3),
        **score(positives["all"], negatives["all"]),
    }
    report["latency_ms"].update(after_write_latency(after))
    report["latency_ms"].update(step_latency(split))
    if ablate:
        report["ablation"] = ablation(positives, negatives, score, _scored)
    return report


def _ask(
    memory: Memory, dia: dict[str, str], question: Question, now: datetime, channels: Sequence[str]
) -> Answer:
    kind = str(question.category)
    return ask(memory, dia, question.text, kind, question.evidence, now, channels)


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown tables."""
    lines = [
        f"LoCoMo retrieval, {report['conversations']} conversations, {report['memories']} "
        f"memories, {report['scored']} scored questions ({report['store']}; channels "
        f"{', '.join(report['channels'])})",
        "",
        *table_head(),
        table_row("overall", report["overall"]),
    ]
    for number, block in report["by_category"].items():
        lines.append(table_row(f"{number} {block['name']}", block))
    lines.append(table_row("5 adversarial (not scored)", report["adversarial"]))
    abst = report["abstention"]
    lines += [
        "",
        latency_line(report),
        f"abstention: AUROC {abst['auroc']:.3f}; abstained on {abst['negatives_abstained']:.1%} of "
        f"{abst['negatives']} foreign questions and {abst['positives_abstained']:.1%} of real ones",
    ]
    if "ablation" in report:
        lines += ablation_table(report)
    return "\n".join(lines)
