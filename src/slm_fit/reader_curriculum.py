"""The reader's curriculum (issue 64, docs/reading.md): learn to read from public dialogue
QA first, then from the dev files' questions, measured on groups never trained on.

- stage 1: the public sets' training split (:mod:`slm_fit.reader_public`: Molweni,
  FriendsQA, SelQA, whole dialogues held out), one list per question
  (:func:`slm_fit.reader_train.sampled_lists`), unanswerable questions as lists with no
  positive;
- stage 2: for each of the five folds of :func:`slm_fit.reader_heldout.folds` (one LoCoMo
  conversation and two BEAM instances held out), the stage-1 model trained on the other
  folds' windows (:func:`slm_fit.reader_train.lists`), so every figure on a dev question
  comes from a model that never saw its conversation.

Each stage keeps a checkpoint in ``work`` (a stopped run continues where it stopped: the
same seed gives the same lists and steps) and its metrics as JSON; the exported int8 files
are read through slm's own reader stage (``slm.recall.reader.Reader``).

Measured, held out: on the public sets' held-out split, the reader against slm's embedder
order (cosine), and answerability (Molweni's unanswerable questions); on the dev files,
slm's order with the shipped reranker (in sample for it: trained on these questions) and
with a leave-one-group-out reranker (:func:`logo_orders`, trained like the shipped one on
the other folds' windows), the reader alone and the blend (``logit - beta ln rank``, beta
chosen per fold on the other folds' questions) on top of each, and answerability (BEAM's
``answerable: false`` questions, other conversations' questions).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slm_bench.metrics import auroc
from slm_fit import reader_public
from slm_fit.reader_data import Read
from slm_fit.reader_heldout import BETAS, TOP, folds, measures
from slm_fit.reader_train import Recipe

#: Answerability reads the reader's this many most probable rows among the top TOP.
ANSWER_TOP = 5

Say = Callable[[str], None]
#: Per read: one logit per row of its window, None where the row was not read.
Scores = dict[int, list[float | None]]


@dataclass(frozen=True, slots=True)
class Plan:
    """One curriculum run: where it keeps its state and what it trains."""

    work: Path
    public: Path
    stage1: Recipe
    stage2: Recipe
    #: Lists drawn from the public training split each epoch (0: all of them).
    stage1_lists: int = 0
    threads: int = 1
    #: Lists drawn from the dev files' training folds each epoch of stage 2 (0: all).
    stage2_lists: int = 0
    #: Held-out public questions measured, at most, of each set and kind (0: all).
    public_questions: int = 0
    #: Whether the dev files' ``foreign`` questions are read (answerability against
    #: another conversation's questions; the scored and unanswerable ones always are).
    foreign: bool = False


def capped(reads: Sequence[Read], most: int) -> list[Read]:
    """The first ``most`` reads of each set and kind (whole groups first: the split keeps
    a group's questions together); all of them when ``most`` is 0."""
    if not most:
        return list(reads)
    seen: dict[tuple[str, str], int] = {}
    out = []
    for read in reads:
        key = (read.file, read.kind)
        if seen.get(key, 0) < most:
            seen[key] = seen.get(key, 0) + 1
            out.append(read)
    return out


def answers(logits: Sequence[float | None], top: int = ANSWER_TOP) -> float:
    """The probability that any of the ``top`` most probable rows answers (noisy-OR of
    their sigmoids, as the answerability term trains it); 0 without rows."""
    known = sorted((float(x) for x in logits if x is not None), reverse=True)[:top]
    none = sum(math.log1p(-1.0 / (1.0 + math.exp(-x))) if x < 30 else -30.0 for x in known)
    return 1.0 - math.exp(none)


def largest(logits: Sequence[float | None]) -> float:
    """The largest row probability (the first reader's answerability)."""
    known = [float(x) for x in logits if x is not None]
    return max((1.0 / (1.0 + math.exp(-x)) for x in known), default=0.0)


def ranked(base: Sequence[int], logits: Sequence[float | None], beta: float | None) -> list[int]:
    """``base`` (rows best first) with its top :data:`TOP` reordered by the reader:
    ``beta`` None by the logit alone, else by ``logit - beta ln(position)``."""
    top = list(base[:TOP])
    keys = []
    for position, row in enumerate(top):
        logit = logits[row] if row < len(logits) else None
        value = -1e9 if logit is None else float(logit)
        keys.append(value - (beta * math.log(position + 1) if beta is not None else 0.0))
    best = sorted(range(len(top)), key=lambda p: (-keys[p], p))
    return [top[p] for p in best] + list(base[TOP:])


def choose_beta(items: Sequence[tuple[Read, Sequence[int], Sequence[float | None]]]) -> float:
    """The beta of :data:`BETAS` with the best MRR@10 on ``items`` (read, base order,
    logits): training folds' questions only (ties: the smaller)."""
    best, value = 0.0, -1.0
    for beta in BETAS:
        mrr = measures([r for r, _, _ in items], [ranked(b, s, beta) for _, b, s in items])[
            "mrr@10"
        ]
        if mrr > value + 1e-12:
            best, value = beta, mrr
    return best


# --- the public sets -------------------------------------------------------------------


def train_stage1(plan: Plan, say: Say) -> tuple[Any, dict[str, Any]]:
    """Stage 1 from the base weights, resumed from ``work/stage1.pt`` when there."""
    import torch

    from slm_fit.reader_model import CrossEncoder, load_base
    from slm_fit.reader_train import fit, sampled_lists

    recipe = plan.stage1
    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    train, _ = reader_public.split(reader_public.load(plan.public))
    epochs = []
    for _ in range(recipe.epochs):
        lists = sampled_lists(train, recipe, rng)
        if plan.stage1_lists and plan.stage1_lists < len(lists):
            lists = rng.sample(lists, plan.stage1_lists)
        epochs.append(lists)
    model = CrossEncoder(load_base(recipe.layers), recipe.pool)
    say(f"stage 1: {len(train)} public questions, {sum(map(len, epochs))} lists")
    metrics = fit(model, epochs, recipe, rng, say, plan.threads, plan.work / "stage1.pt")
    return model, metrics


def score_public(folder: Path, recipe: Recipe, reads: Sequence[Read]) -> Scores:
    """The exported reader's logit for every row of each read."""
    from slm.recall.reader import Reader

    reader = Reader(folder, top=TOP, pieces=recipe.pieces)
    return {
        i: [round(float(x), 4) for x in reader.scores(r.question, r.texts)]
        for i, r in enumerate(reads)
    }


def embedder_scores(reads: Sequence[Read]) -> Scores:
    """slm's embedder's cosine of the question with each row (the order recall's first
    stage would give a dialogue's utterances)."""
    from slm.embed import make_embedder
    from slm.settings import Settings

    embedder = make_embedder(Settings.from_env().embedder)
    out: Scores = {}
    for i, read in enumerate(reads):
        vectors = np.asarray(embedder.embed_batch([read.question, *read.texts]), dtype=np.float32)
        out[i] = [round(float(x), 5) for x in vectors[1:] @ vectors[0]]
    return out


def public_report(reads: Sequence[Read], reader: Scores, embedder: Scores) -> dict[str, Any]:
    """Per set: hit@1 / hit@10 / MRR@10 of the embedder's order and the reader's over
    every row of the held-out questions; answerability AUROCs where a set has
    unanswerable questions."""
    out: dict[str, Any] = {}
    for name in reader_public.SETS:
        own = [i for i, r in enumerate(reads) if r.file == name and r.kind == "own"]
        block: dict[str, Any] = {"groups": len({reads[i].group for i in own})}
        for label, scores in (("embedder", embedder), ("reader", reader)):
            orders = [_by(scores[i]) for i in own]
            block[label] = measures([reads[i] for i in own], orders)
        gone = [i for i, r in enumerate(reads) if r.file == name and r.kind == "unanswerable"]
        if gone:
            block["n_unanswerable"] = len(gone)
            for label, of in (("answers", answers), ("largest", largest)):
                block[f"auroc_{label}"] = round(
                    auroc([of(reader[i]) for i in own], [of(reader[i]) for i in gone]), 4
                )
            block["auroc_embedder_largest_cosine"] = round(
                auroc(
                    [max(embedder[i], key=lambda x: x or 0.0) or 0.0 for i in own],
                    [max(embedder[i], key=lambda x: x or 0.0) or 0.0 for i in gone],
                ),
                4,
            )
        out[name] = block
    return out


def _by(scores: Sequence[float | None]) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: (-(scores[i] or -1e9), i))


# --- the dev files ---------------------------------------------------------------------


def logo_orders(
    reads: Sequence[Read], seen: Sequence[Any], split: Sequence[set[tuple[str, str]]]
) -> list[list[int]]:
    """Each read's rows (positions in its window, which is in the shipped reranker's
    order) in the order of a reranker trained as the shipped one is (both files, anchored
    on each: ``slm_bench.learning.train_joint``) on the scored questions of the folds that
    do not hold the read's group. ``seen``: the windows as read, one per read."""
    from slm.learn.model import default_ranker, order
    from slm_bench.learning import train_joint

    shipped = default_ranker()
    out: list[list[int]] = [[] for _ in reads]
    for n, held in enumerate(split):
        files: dict[str, list[Any]] = {}
        for r, s in zip(reads, seen, strict=True):
            if r.kind == "own" and (r.file, r.group) not in held:
                files.setdefault(r.file, []).append(s)
        ranker = train_joint(files, f"reader curriculum fold {n}")
        for i, (r, s) in enumerate(zip(reads, seen, strict=True)):
            if (r.file, r.group) not in held:
                continue
            position = {row: p for p, row in enumerate(order(shipped, s.example))}
            out[i] = [position[row] for row in order(ranker, s.example)]
    return out


def score_dev(
    folder: Path,
    recipe: Recipe,
    reads: Sequence[Read],
    which: Sequence[int],
    logo: Sequence[Sequence[int]],
) -> Scores:
    """The exported reader's logits for the rows in the top :data:`TOP` of either order
    (the shipped reranker's, the leave-one-group-out one's) of each read in ``which``."""
    from slm.recall.reader import Reader

    reader = Reader(folder, top=TOP, pieces=recipe.pieces)
    out: Scores = {}
    for i in which:
        read = reads[i]
        rows = sorted(set(range(min(TOP, len(read.texts)))) | set(logo[i][:TOP]))
        logits = reader.scores(read.question, [read.texts[r] for r in rows])
        full: list[float | None] = [None] * len(read.texts)
        for row, x in zip(rows, logits, strict=True):
            full[row] = round(float(x), 4)
        out[i] = full
    return out


def dev_report(
    reads: Sequence[Read],
    logo: Sequence[Sequence[int]],
    split: Sequence[set[tuple[str, str]]],
    scores: Scores,
) -> dict[str, Any]:
    """Per dev file, on its scored questions: slm's order with the shipped reranker
    (``default``) and with the leave-one-group-out one (``logo``); on top of each, the
    reader alone and the blend (beta chosen per fold on the other folds' questions); and
    the answerability AUROCs (answerable against ``unanswerable`` and ``foreign``
    questions) of :func:`answers` and :func:`largest` over the top :data:`TOP` of the
    leave-one-group-out order."""
    fold_of = {pair: n for n, held in enumerate(split) for pair in held}
    bases = {
        "default": [list(range(len(r.texts))) for r in reads],
        "logo": [
            list(o) if o else list(range(len(r.texts))) for r, o in zip(reads, logo, strict=True)
        ],
    }
    scored = [i for i, r in enumerate(reads) if r.kind == "own" and i in scores]
    betas: dict[str, list[float]] = {}
    orders: dict[str, dict[int, list[int]]] = {}
    for name, base in bases.items():
        orders[name] = {i: base[i] for i in scored}
        orders[f"{name}+reader"] = {i: ranked(base[i], scores[i], None) for i in scored}
        blend: dict[int, list[int]] = {}
        betas[name] = []
        for n in range(len(split)):
            mine = [i for i in scored if fold_of[(reads[i].file, reads[i].group)] == n]
            others = [i for i in scored if fold_of[(reads[i].file, reads[i].group)] != n]
            beta = choose_beta([(reads[i], base[i], scores[i]) for i in others])
            betas[name].append(beta)
            blend.update({i: ranked(base[i], scores[i], beta) for i in mine})
        orders[f"{name}+blend"] = blend
    out: dict[str, Any] = {"betas": betas}
    for file in sorted({reads[i].file for i in scored}):
        mine = [i for i in scored if reads[i].file == file]
        block: dict[str, Any] = {
            name: measures([reads[i] for i in mine], [order[i] for i in mine])
            for name, order in orders.items()
        }
        answerable = [i for i in mine if reads[i].texts]
        for kind in ("unanswerable", "foreign"):
            asked = [
                i
                for i, r in enumerate(reads)
                if r.file == file and r.kind == kind and i in scores and r.texts
            ]
            if not asked:
                continue
            block[f"n_{kind}"] = len(asked)
            for label, of in (("answers", answers), ("largest", largest)):
                top = {
                    i: [scores[i][row] for row in bases["logo"][i][:TOP]]
                    for i in answerable + asked
                }
                block[f"auroc_{kind}_{label}"] = round(
                    auroc([of(top[i]) for i in answerable], [of(top[i]) for i in asked]), 4
                )
        out[file] = block
    return out


def markdown(title: str, report: Mapping[str, Any]) -> str:
    lines = [f"**{title}**", "", "| file | order | questions | hit@1 | hit@10 | MRR@10 |"]
    lines.append("|---|---|---|---|---|---|")
    for file, block in report.items():
        if file == "betas" or not isinstance(block, dict):
            continue
        for name in (
            "default",
            "default+reader",
            "default+blend",
            "logo",
            "logo+reader",
            "logo+blend",
        ):
            m = block[name]
            lines.append(
                f"| {file} | {name} | {m['n']} | {m['hit@1']:.3f} | {m['hit@10']:.3f} | "
                f"{m['mrr@10']:.3f} |"
            )
    return "\n".join(lines)


# --- the run ---------------------------------------------------------------------------


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _write(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(value), encoding="utf-8")
    partial.replace(path)


def _keyed(raw: Mapping[str, Any]) -> Scores:
    return {int(i): list(s) for i, s in raw.items()}


def stage1(plan: Plan, say: Say) -> dict[str, Any]:
    """Stage 1 trained (or resumed: a finished checkpoint is not trained again), exported to
    ``work/stage1/`` and measured on the public held-out split (:func:`capped`); its
    report, kept as ``work/stage1.json``."""
    from slm_fit.reader_train import export

    kept = plan.work / "stage1.json"
    if kept.exists():
        done: dict[str, Any] = _json(kept)
        if (done["recipe"], done["lists"], done["public_questions"]) == (
            _recipe(plan.stage1),
            plan.stage1_lists,
            plan.public_questions,
        ):
            return done
    model, metrics = train_stage1(plan, say)
    exported = export(model, plan.work / "stage1")
    _, held = reader_public.split(reader_public.load(plan.public))
    held = capped(held, plan.public_questions)
    cached = plan.work / "public-embedder.json"
    if not cached.exists():
        _write(cached, embedder_scores(held))
    reader = score_public(plan.work / "stage1", plan.stage1, held)
    result = {
        "recipe": _recipe(plan.stage1),
        "lists": plan.stage1_lists,
        "public_questions": plan.public_questions,
        "training": metrics,
        "model": exported,
        "held_out_questions": len(held),
        "public_held_out": public_report(held, reader, _keyed(_json(cached))),
    }
    _write(kept, result)
    return result


def _recipe(recipe: Recipe) -> dict[str, Any]:
    return {k: getattr(recipe, k) for k in recipe.__dataclass_fields__}


def dev_setup(
    plan: Plan, reads: Sequence[Read], seen: Sequence[Any], say: Say
) -> tuple[list[set[tuple[str, str]]], list[list[int]]]:
    """The folds and the leave-one-group-out orders (kept as ``work/logo.json``)."""
    split = folds(reads)
    kept = plan.work / "logo.json"
    if kept.exists():
        return split, _json(kept)
    say("training the leave-one-group-out rerankers")
    logo = logo_orders(reads, seen, split)
    _write(kept, logo)
    return split, logo


def stage1_on_dev(
    plan: Plan, reads: Sequence[Read], logo: Sequence[Sequence[int]], say: Say
) -> Scores:
    """The stage-1 model (never trained on a dev file) reading every dev question."""
    kept = plan.work / "stage1-dev.json"
    if kept.exists():
        return _keyed(_json(kept))
    say("stage 1 reading the dev files")
    which = [i for i, r in enumerate(reads) if plan.foreign or r.kind != "foreign"]
    scores = score_dev(plan.work / "stage1", plan.stage1, reads, which, logo)
    _write(kept, scores)
    return scores


def stage2_fold(
    plan: Plan,
    reads: Sequence[Read],
    held: set[tuple[str, str]],
    n: int,
    logo: Sequence[Sequence[int]],
    say: Say,
) -> dict[str, Any]:
    """Stage 2 for fold ``n``: the stage-1 weights trained on the other folds' windows,
    exported, reading the held-out questions; kept as ``work/stage2-fold-N.json``."""
    import torch

    from slm_fit.reader_model import CrossEncoder, load_base
    from slm_fit.reader_train import export, fit, lists

    kept = plan.work / f"stage2-fold-{n}.json"
    if kept.exists():
        done: dict[str, Any] = _json(kept)
        if (done["recipe"], done["lists"]) == (_recipe(plan.stage2), plan.stage2_lists):
            return done
    recipe = plan.stage2
    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    model = CrossEncoder(load_base(recipe.layers), recipe.pool)
    model.load_state_dict(torch.load(plan.work / "stage1.pt", weights_only=False)["model"])
    training = [r for r in reads if (r.file, r.group) not in held]
    epochs = []
    for _ in range(recipe.epochs):
        drawn = lists(training, recipe, rng)
        if plan.stage2_lists and plan.stage2_lists < len(drawn):
            drawn = rng.sample(drawn, plan.stage2_lists)
        epochs.append(drawn)
    say(f"stage 2 fold {n}: holding out {sorted(held)}; {len(epochs[0])} lists an epoch")
    metrics = fit(model, epochs, recipe, rng, say, plan.threads, plan.work / f"stage2-fold-{n}.pt")
    folder = plan.work / f"stage2-fold-{n}"
    exported = export(model, folder)
    which = [
        i
        for i, r in enumerate(reads)
        if (r.file, r.group) in held and (plan.foreign or r.kind != "foreign")
    ]
    result = {
        "recipe": _recipe(recipe),
        "lists": plan.stage2_lists,
        "held_out": sorted(map(list, held)),
        "training": metrics,
        "model": exported,
        "scores": score_dev(folder, recipe, reads, which, logo),
    }
    _write(kept, result)
    return result
