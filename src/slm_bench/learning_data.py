"""The data of the learning benchmark: both dev layouts read as groups (a conversation, an
instance) of memories and scored questions, and each question's reranking window as a
training example (``slm.learn.model.Example``) labelled by its evidence.

An example's rows are the window of a recall without a reranker, best first; a row is
useful (1) when its memory is evidence for the question, else not useful (0).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from slm.engine import Memory, MemoryInput
from slm.learn.adapt import read_window
from slm.learn.features import feature_names
from slm.learn.model import Example
from slm.models import RecallRequest
from slm_bench import locomo, retrieval


@dataclass(frozen=True, slots=True)
class Asked:
    """A question to ask of a group's store."""

    text: str
    kind: str
    evidence: frozenset[str]


@dataclass(frozen=True, slots=True)
class Group:
    """One conversation or instance: its memories (each names its data-set id in
    ``metadata[id_key]``), its scored questions and the moment they are asked at."""

    name: str
    memories: tuple[MemoryInput, ...]
    questions: tuple[Asked, ...]
    now: datetime
    id_key: str


@dataclass(frozen=True, slots=True)
class Seen:
    """One question's window: the data-set ids of its rows and the labelled example."""

    group: str
    question: Asked
    ids: tuple[str, ...]
    example: Example


def groups(path: str | Path) -> list[Group]:
    """The groups of a LoCoMo file (the original layout) or of a file in the generic
    layout (BENCHMARK.md section 3), told apart by their shape."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(raw, dict) and "instances" in raw:
        _, instances = retrieval.load(path)
        return [
            Group(
                i.id,
                i.memories,
                tuple(
                    Asked(q.text, q.kind, q.evidence)
                    for q in i.questions
                    if q.answerable and q.evidence
                ),
                i.now,
                "id",
            )
            for i in instances
        ]
    conversations, _ = locomo.load(path)
    return [
        Group(
            c.sample_id,
            c.turns,
            tuple(
                Asked(q.text, str(q.category), q.evidence)
                for q in c.questions
                if q.category in locomo.SCORED_CATEGORIES
            ),
            c.last_time,
            "dia_id",
        )
        for c in conversations
    ]


def label(ids: Sequence[str], evidence: frozenset[str]) -> tuple[int, ...]:
    return tuple(1 if i in evidence else 0 for i in ids)


def examples(
    memory: Memory, group: Group, ids: dict[str, str], questions: Sequence[Asked]
) -> Iterator[Seen]:
    """Each question's window on ``memory`` (where ``group`` is stored), labelled."""
    for question in questions:
        window = read_window(memory.recall_with, RecallRequest(question.text, k=10, now=group.now))
        row_ids = tuple(ids.get(i, "") for i in window.ids)
        yield Seen(
            group.name,
            question,
            row_ids,
            Example(window.matrix, label(row_ids, question.evidence)),
        )


def save(seen: Sequence[Seen], path: Path) -> None:
    """Write collected windows to ``path`` (.npz) to train and test models without
    storing the data again."""
    meta = [
        {
            "group": s.group,
            "text": s.question.text,
            "kind": s.question.kind,
            "evidence": sorted(s.question.evidence),
            "ids": list(s.ids),
        }
        for s in seen
    ]
    matrices = {f"m{i}": s.example.matrix for i, s in enumerate(seen)}
    matrices["meta"] = np.array(json.dumps(meta))
    save_arrays: Any = np.savez_compressed  # its stubs take no ** of arrays
    save_arrays(path, **matrices)


def load(path: Path) -> list[Seen]:
    data = np.load(path)
    meta = json.loads(str(data["meta"]))
    out = []
    for i, m in enumerate(meta):
        question = Asked(m["text"], m["kind"], frozenset(m["evidence"]))
        ids = tuple(m["ids"])
        matrix = data[f"m{i}"]
        if len(matrix) and matrix.shape[1] != len(feature_names()):
            raise ValueError(f"{path} was collected for other features; collect it again")
        out.append(Seen(m["group"], question, ids, Example(matrix, label(ids, question.evidence))))
    return out
