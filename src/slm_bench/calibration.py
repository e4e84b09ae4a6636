"""Labelled recalls from the benchmark files, for ``slm calibrate locomo`` and ``slm
calibrate retrieval`` (docs/calibration.md): each conversation or instance is stored as one
profile of a store, and each question written as a label (slm_fit.labelled) naming the memories
that hold its answer.

LoCoMo: every scored question (categories 1-4) of a conversation, labelled with its cleaned
evidence, and every scored question of the next conversation in the file, asked of this
one, labelled as holding no answer (as ``slm bench locomo`` checks abstention). The generic
layout (BEAM): every question, answerable ones with their evidence and unanswerable ones
with none. The group is the conversation, or the instance.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from slm.embed import Embedder
from slm.engine import Memory
from slm.errors import InvalidInput
from slm.settings import Settings
from slm_bench import locomo, retrieval

LOCOMO_CORPUS = (
    "LoCoMo conversations: one store profile per conversation, one memory per turn "
    "('speaker: text', image captions appended), event time the session's date"
)
LOCOMO_QUERIES = (
    "each conversation's LoCoMo questions of categories 1-4 with their cleaned evidence, and "
    "as many again from the next conversation of the file, which the store cannot answer"
)
RETRIEVAL_CORPUS = "{name}: one store profile per instance, its memories as given"
RETRIEVAL_QUERIES = (
    "{name}'s questions: answerable ones with their evidence, unanswerable ones (answerable: "
    "false) as holding no answer"
)


def _fresh(db: Path, profile: str, settings: Settings, embedder: Embedder) -> Memory:
    memory = Memory(db, profile=profile, settings=settings, embedder=embedder)
    if memory.count():
        memory.close()
        raise InvalidInput(
            f"profile {profile!r} of {db} already holds memories; build the labels into a new --db",
            field="db",
        )
    return memory


def _label(
    query: str, evidence: Iterable[str], profile: str, group: str, now: datetime, kind: str
) -> dict[str, Any]:
    return {
        "query": query,
        "evidence": sorted(evidence),
        "profile": profile,
        "group": group,
        "now": now.isoformat(),
        "kind": kind,
    }


def locomo_labels(
    data: str | Path,
    db: Path,
    settings: Settings,
    embedder: Embedder,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Store the LoCoMo conversations of ``data`` in ``db`` and return their labels."""
    conversations, _ = locomo.load(data)
    labels: list[dict[str, Any]] = []
    for index, conv in enumerate(conversations):
        profile = f"locomo-{conv.sample_id}"
        with _fresh(db, profile, settings, embedder) as memory:
            records = memory.remember_many(conv.turns)
        ids: dict[str, str] = {str(r.metadata["dia_id"]): r.id for r in records}
        for question in conv.questions:
            if question.category not in locomo.SCORED_CATEGORIES:
                continue
            held = [ids[dia] for dia in question.evidence if dia in ids]
            labels.append(
                _label(
                    question.text,
                    held,
                    profile,
                    conv.sample_id,
                    conv.last_time,
                    str(question.category),
                )
            )
        other = conversations[(index + 1) % len(conversations)]
        if other is not conv:
            for question in other.questions:
                if question.category in locomo.SCORED_CATEGORIES:
                    foreign = _label(
                        question.text, (), profile, conv.sample_id, conv.last_time, "foreign"
                    )
                    labels.append({**foreign, "origin": other.sample_id})
        if progress:
            progress(f"{conv.sample_id}: {len(records)} memories")
    return labels


def retrieval_labels(
    data: str | Path,
    db: Path,
    settings: Settings,
    embedder: Embedder,
    progress: Callable[[str], None] | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """Store the instances of ``data`` (the generic layout) in ``db``; return the data
    set's name and the labels. An answerable question whose evidence the engine refused
    to store is labelled as holding no answer, which is what the store holds."""
    name, instances = retrieval.load(data)
    labels: list[dict[str, Any]] = []
    refused = retrieval.Refused({})
    for instance in instances:
        profile = re.sub(r"[^A-Za-z0-9_.-]", "_", instance.id)[:64]
        with _fresh(db, profile, settings, embedder) as memory:
            stored = retrieval.store_all(memory, instance.memories, refused)
        ids = {given: memory_id for memory_id, given in stored.items()}
        for question in instance.questions:
            if question.answerable and not question.evidence:
                continue
            held = [ids[e] for e in question.evidence if e in ids] if question.answerable else []
            kind = question.kind if question.answerable else "unanswerable"
            labels.append(_label(question.text, held, profile, instance.id, instance.now, kind))
        if progress:
            progress(f"{instance.id}: {len(stored)} memories")
    return name, labels


def write_labels(labels: Iterable[dict[str, Any]], path: Path) -> None:
    """Write labels as JSON Lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for label in labels:
            out.write(json.dumps(label, ensure_ascii=False) + "\n")
