"""The learning benchmark (``slm bench learning``; docs/learning.md).

Each question of both dev files is asked once without a reranker; its window (the top 50
before reranking, ``slm.learn.features``) is kept with the evidence as labels. Models are
then trained and tested on those windows, never on the question they are tested on:

- leave one group out: for each conversation (instance) of a file, a model trained on the
  file's other groups reranks its questions;
- across files: a model trained on one file reranks the other;
- learning from feedback: in each group, a share of the questions gets simulated feedback
  on what the untrained ranker (the leave-one-group-out model) returned, evidence marked
  useful and the rest not useful, and the profile's learning (``slm.learn.adapt.learn``,
  with its guard rails) runs on it; the other questions are the test. Hostile feedback
  labels the same results at random.

Scores are those of the recall's top 10 (hit@1, hit@10, MRR@10), as in the retrieval
benchmarks: "base" is the order without a reranker.
"""

from __future__ import annotations

import math
import random
import tempfile
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from slm.embed import make_embedder
from slm.engine import Memory
from slm.learn.adapt import MIN_QUERIES, learn
from slm.learn.features import FEATURES
from slm.learn.model import Example, Ranker, fit, order
from slm.settings import Settings
from slm_bench import learning_data as data
from slm_bench import retrieval
from slm_bench.learning_data import Seen
from slm_bench.report import Answer, K, paired, summarise

#: Pull toward zero of the models trained here (``slm.learn.model.fit``'s ``l2``).
L2 = 10.0
MEASURES = ("hit@1", "hit@10", "mrr@10")


def collect(
    path: str | Path, settings: Settings, progress: Callable[[str], None] | None = None
) -> list[Seen]:
    """Every scored question's window, one fresh SQLite store per group."""
    embedder = make_embedder(settings.embedder)
    seen: list[Seen] = []
    for group in data.groups(path):
        with (
            tempfile.TemporaryDirectory(prefix="slm-learning-") as tmp,
            Memory(Path(tmp) / "bench.db", settings=settings, embedder=embedder) as memory,
        ):
            ids = retrieval.store_all(memory, group.memories, retrieval.Refused({}), group.id_key)
            seen.extend(data.examples(memory, group, ids, group.questions))
        if progress:
            progress(f"{group.name}: {len(group.questions)} questions")
    return seen


def answer(seen: Seen, ranker: Ranker | None) -> Answer:
    """The top ``K`` of one question's window under ``ranker`` (None: as it was)."""
    ranked = tuple(seen.ids[i] for i in order(ranker, seen.example)[:K])
    return Answer(seen.question.kind, ranked, seen.question.evidence, 0.0, not ranked, 0.0)


def compare(seen: Sequence[Seen], ranker: Callable[[Seen], Ranker | None]) -> dict[str, Any]:
    """Base and reranked scores of ``seen``, and the paired hit@10 comparison."""
    base = [answer(s, None) for s in seen]
    reranked = [answer(s, ranker(s)) for s in seen]
    applied = [
        s for s in seen if (model := ranker(s)) is not None and model.applies(s.example.matrix)
    ]
    return {
        "base": _measures(base),
        "reranked": _measures(reranked),
        "paired_hit@10": paired(base, reranked),
        # the windows like the model's training data (``Ranker.applies``): the rest keep
        # their order
        "reranked_share": round(len(applied) / max(len(seen), 1), 4),
    }


def _measures(answers: Sequence[Answer]) -> dict[str, Any]:
    summary = summarise(answers)
    return {"n": summary["n"], **{m: summary.get(m, 0.0) for m in MEASURES}}


def by_group(seen: Sequence[Seen]) -> dict[str, list[Seen]]:
    groups: dict[str, list[Seen]] = defaultdict(list)
    for s in seen:
        groups[s.group].append(s)
    return dict(groups)


def train(
    seen: Sequence[Seen], name: str, kinds: Mapping[str, Sequence[Seen]] | None = None
) -> Ranker:
    """A model trained on ``seen``; ``kinds``: the same windows by the kind of store (file)
    they come from, each an anchor of the model's guard (``slm.learn.model.Anchor``)."""
    groups = {kind: [s.example for s in ss] for kind, ss in (kinds or {}).items()}
    return fit([s.example for s in seen], l2=L2, trained_on=name, kinds=groups)


def train_joint(files: Mapping[str, Sequence[Seen]], name: str) -> Ranker:
    """One model for every file, anchored on each (how the shipped model is trained)."""
    return train([s for seen in files.values() for s in seen], name, files)


def leave_one_out(seen: Sequence[Seen], name: str) -> dict[str, Ranker]:
    """For each group, a model trained on the file's other groups."""
    groups = by_group(seen)
    return {
        group: train([s for g, ss in groups.items() if g != group for s in ss], f"{name} - {group}")
        for group in groups
    }


def leave_one_out_joint(files: Mapping[str, Sequence[Seen]]) -> dict[str, Ranker]:
    """For each group of every file, one model trained on all the other groups of every
    file, as the shipped model is: the held-out estimate of what a user gets."""
    names = {s.group for seen in files.values() for s in seen}
    return {
        group: train_joint(
            {name: [s for s in seen if s.group != group] for name, seen in files.items()},
            f"all - {group}",
        )
        for group in sorted(names)
    }


def simulate(
    seen: Sequence[Seen],
    untrained: Mapping[str, Ranker],
    share: float,
    seed: int,
    hostile: bool,
) -> dict[str, Any]:
    """Learning from feedback on ``share`` of each group's questions, tested on the rest
    (see the module docstring)."""
    # One split for genuine and hostile feedback alike; the random labels draw apart.
    split, rng = random.Random(seed), random.Random(seed + 1)
    before: list[Answer] = []
    after: list[Answer] = []
    adopted = 0
    groups = by_group(seen)
    for group, questions in groups.items():
        base = untrained[group]
        shuffled = list(questions)
        split.shuffle(shuffled)
        cut = round(share * len(shuffled))
        taught, tested = shuffled[:cut], shuffled[cut:]
        marks: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        examples = []
        for s in taught:
            # What a recall shows is read before its own feedback, after the earlier ones'.
            example = _feedback(_marked(s, marks), base, rng, hostile)
            examples.append(example)
            for row, label in enumerate(example.labels):
                if label is not None:
                    marks[s.ids[row]][0 if label else 1] += 1
        model, _ = learn(examples, base)
        adopted += model is not None
        before.extend(answer(s, base) for s in tested)
        after.extend(answer(_marked(s, marks), model or base) for s in tested)
    return {
        "untrained": _measures(before),
        "learned": _measures(after),
        "paired_hit@10": paired(before, after),
        "groups": len(groups),
        "groups_adopted": adopted,
    }


def _marked(seen: Seen, marks: Mapping[str, Sequence[int]]) -> Seen:
    """``seen`` with the feedback counts of its rows' memories as features (the
    ``marked_*`` columns of ``slm.learn.features``)."""
    matrix = seen.example.matrix.copy()
    if len(matrix):
        for row, id_ in enumerate(seen.ids):
            useful, not_useful = marks.get(id_, (0, 0))
            matrix[row, _USEFUL] = math.log1p(useful)
            matrix[row, _NOT_USEFUL] = math.log1p(not_useful)
    return replace(seen, example=Example(matrix, seen.example.labels))


_USEFUL = FEATURES.index("marked_useful")
_NOT_USEFUL = FEATURES.index("marked_not_useful")


def _feedback(seen: Seen, ranker: Ranker, rng: random.Random, hostile: bool) -> Example:
    """The labels feedback gives on what ``ranker`` returned (top ``K``): evidence useful,
    the rest not useful; at random when ``hostile``. Rows not returned stay unlabelled."""
    shown = set(order(ranker, seen.example)[:K])
    labels: list[int | None] = []
    for row, label in enumerate(seen.example.labels):
        if row not in shown:
            labels.append(None)
        elif hostile:
            labels.append(rng.randint(0, 1))
        else:
            labels.append(label)
    return Example(seen.example.matrix, tuple(labels))


def evaluate(
    files: Mapping[str, Sequence[Seen]], share: float = 0.3, seed: int = 0
) -> dict[str, Any]:
    """The report: leave one group out and learning per file, and across files."""
    report: dict[str, Any] = {"files": {}, "across": {}, "share": share, "seed": seed}
    for name, seen in files.items():
        untrained = leave_one_out(seen, name)
        report["files"][name] = {
            "questions": len(seen),
            "groups": len(by_group(seen)),
            "leave_one_group_out": compare(seen, _per_group(untrained)),
            "learning": simulate(seen, untrained, share, seed, hostile=False),
            "hostile_learning": simulate(seen, untrained, share, seed, hostile=True),
        }
    joint = leave_one_out_joint(files)
    report["joint"] = {name: compare(seen, _per_group(joint)) for name, seen in files.items()}
    names = list(files)
    for source in names:
        for target in names:
            if source != target:
                model = train(files[source], source)
                every = {s.group: model for s in files[target]}
                report["across"][f"{source} -> {target}"] = compare(
                    files[target], _per_group(every)
                )
    report["min_queries"] = MIN_QUERIES
    return report


def _per_group(models: Mapping[str, Ranker]) -> Callable[[Seen], Ranker | None]:
    return lambda seen: models[seen.group]


def load_or_collect(
    path: str | Path,
    settings: Settings,
    cache: Path | None,
    progress: Callable[[str], None] | None = None,
) -> list[Seen]:
    """The windows of a file, read from ``cache`` (a directory) when there, else
    collected and written there."""
    if cache is not None:
        kept = cache / f"{Path(path).stem}.windows.npz"
        if kept.exists():
            return data.load(kept)
    seen = collect(path, settings, progress)
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        data.save(seen, kept)
    return seen


def markdown(report: dict[str, Any]) -> str:
    lines = ["| set | questions | hit@1 | hit@10 | MRR@10 |", "|---|---|---|---|---|"]

    def row(label: str, block: Mapping[str, Any]) -> str:
        return (
            f"| {label} | {block['n']} | {block['hit@1']:.3f} | {block['hit@10']:.3f} | "
            f"{block['mrr@10']:.3f} |"
        )

    for name, block in report["files"].items():
        loo = block["leave_one_group_out"]
        lines.append(row(f"{name}: no reranker", loo["base"]))
        share = loo["reranked_share"]
        label = f"{name}: reranker, leave one group out (applied to {share:.0%} of windows)"
        lines.append(row(label, loo["reranked"]))
        for kind in ("learning", "hostile_learning"):
            sim = block[kind]
            label = "hostile feedback" if kind.startswith("hostile") else "feedback"
            lines.append(row(f"{name}: untrained ranker (test share)", sim["untrained"]))
            lines.append(
                row(
                    f"{name}: after {label} ({sim['groups_adopted']}/{sim['groups']} "
                    "groups adopted a model)",
                    sim["learned"],
                )
            )
    for name, block in report.get("joint", {}).items():
        share = block["reranked_share"]
        label = f"{name}: one model for both files, leave one group out (applied to {share:.0%})"
        lines.append(row(label, block["reranked"]))
    for name, block in report["across"].items():
        lines.append(row(f"{name}: no reranker", block["base"]))
        share = block["reranked_share"]
        lines.append(
            row(f"{name}: reranker (applied to {share:.0%} of windows)", block["reranked"])
        )
    return "\n".join(lines)
