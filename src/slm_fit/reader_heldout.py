"""The reader measured by group: what it does to slm's order on conversations it never saw.

Five folds, each holding out one LoCoMo conversation and two BEAM instances; a reader is
trained on the rest and reads the top :data:`TOP` of each held-out question's window in
slm's default order (the reranker on). Three orders are compared on the scored questions
(hit@1, hit@10, MRR@10 over the window's top 10):

- ``default``: slm's order, as recall returns it;
- ``reader``: the top 20 by the reader's logit alone;
- ``blend``: by ``logit + beta * -ln(position)``, ``beta`` chosen for each fold on the
  other folds' held-out scores (questions that fold's reader was trained on: its own
  held-out questions never choose it).

Answerability: the AUROC of the largest reader probability (sigmoid of the logit) among a
question's top 20 (0 when slm returned nothing), answerable questions against questions
of another conversation (``foreign``) and BEAM's ``answerable: false`` questions; and the
same among the questions slm returned something for (``_returned``: the reader's own
part, without slm's evidence floor).

Nothing here imports torch: scores come from the exported int8 files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from slm_bench.metrics import auroc
from slm_fit.reader_data import Read

TOP = 20
K = 10
BETAS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)
ORDERS = ("default", "reader", "blend")


def folds(reads: Sequence[Read], count: int = 5) -> list[set[tuple[str, str]]]:
    """Held-out (file, group) pairs per fold: each file's groups, sorted, dealt in turn."""
    out: list[set[tuple[str, str]]] = [set() for _ in range(count)]
    for file in sorted({r.file for r in reads}):
        groups = sorted({r.group for r in reads if r.file == file})
        per = max(1, len(groups) // count)
        for i, group in enumerate(groups):
            out[min(i // per, count - 1)].add((file, group))
    return out


def ranked(read: Read, logits: Sequence[float] | None, beta: float | None) -> list[int]:
    """Rows of ``read`` best first: the top :data:`TOP` by reader (``beta`` None: logit
    alone, else the blend), the rest as slm ordered them."""
    n = min(TOP, len(read.texts))
    if logits is None:
        return list(range(len(read.texts)))
    keys = [
        float(logits[i]) + (beta * -math.log(i + 1) if beta is not None else 0.0) for i in range(n)
    ]
    top = sorted(range(n), key=lambda i: (-keys[i], i))
    return top + list(range(n, len(read.texts)))


def measures(reads: Sequence[Read], orders: Sequence[Sequence[int]]) -> dict[str, float]:
    """hit@1, hit@10 and MRR@10 of the scored questions ``reads`` under ``orders``."""
    hits1, hits10, rr = [], [], []
    for read, rows in zip(reads, orders, strict=True):
        first = next((p for p, row in enumerate(rows[:K]) if read.labels[row]), None)
        hits1.append(first == 0)
        hits10.append(first is not None)
        rr.append(0.0 if first is None else 1.0 / (first + 1))
    n = len(reads)
    return {
        "n": n,
        "hit@1": round(float(np.mean(hits1)) if n else 0.0, 4),
        "hit@10": round(float(np.mean(hits10)) if n else 0.0, 4),
        "mrr@10": round(float(np.mean(rr)) if n else 0.0, 4),
    }


def best_beta(
    reads: Sequence[Read], scores: Mapping[int, Sequence[float]], index: Mapping[int, Read]
) -> float:
    """The beta of :data:`BETAS` with the highest MRR@10 over the scored questions in
    ``scores`` (ties: the smaller)."""
    asked = [i for i in scores if index[i].kind == "own"]
    best, value = 0.0, -1.0
    for beta in BETAS:
        mrr = measures(
            [index[i] for i in asked], [ranked(index[i], scores[i], beta) for i in asked]
        )["mrr@10"]
        if mrr > value + 1e-12:
            best, value = beta, mrr
    return best


def probability(logits: Sequence[float]) -> float:
    return max((1.0 / (1.0 + math.exp(-float(x))) for x in logits), default=0.0)


def report(
    reads: Sequence[Read],
    scores: Mapping[int, Sequence[float]],
    betas: Mapping[int, float],
) -> dict[str, Any]:
    """Per file: the three orders on the scored questions and the answerability AUROCs.
    ``scores``: read index -> logits of its top rows; ``betas``: read index -> the blend's
    beta for it."""
    out: dict[str, Any] = {}
    for file in sorted({r.file for r in reads}):
        own = [i for i, r in enumerate(reads) if r.file == file and r.kind == "own"]
        block: dict[str, Any] = {}
        for name in ORDERS:
            orders = [
                ranked(
                    reads[i],
                    None if name == "default" else scores.get(i),
                    betas.get(i) if name == "blend" else None,
                )
                for i in own
            ]
            block[name] = measures([reads[i] for i in own], orders)
        answerable = [probability(scores.get(i, ())) for i in own]
        read_any = [probability(scores.get(i, ())) for i in own if reads[i].texts]
        for kind in ("foreign", "unanswerable"):
            asked = [i for i, r in enumerate(reads) if r.file == file and r.kind == kind]
            if not asked:
                continue
            others = [probability(scores.get(i, ())) for i in asked]
            block[f"auroc_{kind}"] = round(auroc(answerable, others), 4)
            block[f"n_{kind}"] = len(others)
            # the reader's own part: only questions slm returned something for
            returned = [probability(scores.get(i, ())) for i in asked if reads[i].texts]
            if returned:
                block[f"auroc_{kind}_returned"] = round(auroc(read_any, returned), 4)
                block[f"n_{kind}_returned"] = len(returned)
        out[file] = block
    return out


def markdown(title: str, blocks: Mapping[str, Any]) -> str:
    lines = [
        f"**{title}**",
        "",
        "| file | order | questions | hit@1 | hit@10 | MRR@10 |",
        "|---|---|---|---|---|---|",
    ]
    for file, block in blocks.items():
        for name in ORDERS:
            m = block[name]
            lines.append(
                f"| {file} | {name} | {m['n']} | {m['hit@1']:.3f} | {m['hit@10']:.3f} | "
                f"{m['mrr@10']:.3f} |"
            )
    lines += [
        "",
        "| file | AUROC answerable vs foreign | (where slm returned any) | vs unanswerable "
        "| (where slm returned any) |",
        "|---|---|---|---|---|",
    ]
    for file, block in blocks.items():
        cells = [
            _cell(block.get(f"auroc_{name}"), block.get(f"n_{name}"))
            for name in ("foreign", "foreign_returned", "unanswerable", "unanswerable_returned")
        ]
        lines.append(f"| {file} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: float | None, n: int | None) -> str:
    return "-" if value is None else f"{value:.3f} (n={n})"
