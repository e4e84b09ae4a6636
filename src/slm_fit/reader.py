"""The reader's fitting command: ``python -m slm_fit.reader COMMAND`` (docs/reading.md).

- ``check``: the base weights' hash, and that they are the published model (their sentence
  embeddings against slm's int8 embedder);
- ``heldout``: the five folds of :mod:`slm_fit.reader_heldout`, each trained and exported,
  then the held-out report (JSON and a Markdown table); folds already scored in ``--work``
  are kept;
- ``train``: one reader on every scored question of both dev files, exported to ``--out``,
  with its in-sample report, size and latency;
- ``curriculum``: the public sets first, then the dev files by fold
  (:mod:`slm_fit.reader_curriculum`); ``--stage 1`` stops after the public sets,
  ``--folds`` trains those folds' second stage only.

Needs torch, safetensors and the weights package (:mod:`slm_fit.reader_model`); the dev
files' windows are collected once into ``--work`` (outside the repository).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from slm_fit import reader_heldout as heldout
from slm_fit.reader_data import Read, dated, load_or_collect, load_or_find_asks
from slm_fit.reader_train import Recipe

DEFAULT = Recipe()


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _reads(args: argparse.Namespace, recipe: Recipe) -> list[Read]:
    cache = args.work / "windows"
    paths = (args.beam, args.locomo)
    reads = [r for path in paths for r in load_or_collect(path, cache, _say)]
    return dated(reads, paths) if recipe.dates else reads


def _asks(args: argparse.Namespace, recipe: Recipe) -> list[Read]:
    """The asking turns and their replies (``Recipe.asks`` > 0), dated as the reads are."""
    if not recipe.asks:
        return []
    paths = (args.beam, args.locomo)
    found = [r for path in paths for r in load_or_find_asks(path, args.work / "windows")]
    return dated(found, paths) if recipe.dates else found


def score(
    folder: Path, recipe: Recipe, reads: Sequence[Read], which: Sequence[int]
) -> dict[int, list[float]]:
    """The exported reader's logits for the top rows of each of ``which``, through slm's own
    reader stage (onnxruntime, one thread)."""
    from slm.recall.reader import Reader

    reader = Reader(folder, top=heldout.TOP, pieces=recipe.pieces)
    out = {}
    for i in which:
        texts = reads[i].texts[: heldout.TOP]
        out[i] = [round(float(x), 4) for x in reader.scores(reads[i].question, texts)]
    return out


def _fold(
    args: argparse.Namespace, recipe: Recipe, reads: list[Read], n: int, held: set[tuple[str, str]]
) -> dict[str, Any]:
    from slm_fit.reader_train import export, train

    kept = args.work / f"fold-{n}.json"
    if kept.exists():
        result: dict[str, Any] = json.loads(kept.read_text(encoding="utf-8"))
        # a fold written before a recipe option existed was trained with its default
        if {**recipe_dict(DEFAULT), **result["recipe"]} == recipe_dict(recipe):
            return result
    training = [r for r in reads if (r.file, r.group) not in held]
    asked = [r for r in _asks(args, recipe) if (r.file, r.group) not in held]
    _say(f"fold {n}: holding out {sorted(held)}; {len(training)} windows to train on")
    model, metrics = train(training, recipe, _say, args.threads, asked)
    folder = args.work / f"fold-{n}"
    exported = export(model, folder)
    which = [i for i, r in enumerate(reads) if (r.file, r.group) in held]
    result = {
        "recipe": recipe_dict(recipe),
        "held_out": sorted(map(list, held)),
        "training": metrics,
        "model": exported,
        "scores": score(folder, recipe, reads, which),
    }
    kept.write_text(json.dumps(result), encoding="utf-8")
    return result


def recipe_dict(recipe: Recipe) -> dict[str, Any]:
    return {k: getattr(recipe, k) for k in recipe.__dataclass_fields__}


def run_heldout(args: argparse.Namespace, recipe: Recipe) -> dict[str, Any]:
    reads = _reads(args, recipe)
    split = heldout.folds(reads)
    if args.fold is not None:
        return _fold(args, recipe, reads, args.fold, split[args.fold])["training"]  # type: ignore[no-any-return]
    kept = sorted(set(args.folds)) if args.folds else list(range(len(split)))
    results = [_fold(args, recipe, reads, n, split[n]) for n in kept]
    per_fold = [{int(i): s for i, s in r["scores"].items()} for r in results]
    if len(kept) < len(split):
        # only the chosen folds' held-out questions are reported
        shown = sorted(i for fold in per_fold for i in fold)
        renumber = {i: j for j, i in enumerate(shown)}
        reads = [reads[i] for i in shown]
        per_fold = [{renumber[i]: s for i, s in fold.items()} for fold in per_fold]
    scores = {i: s for fold in per_fold for i, s in fold.items()}
    index = dict(enumerate(reads))
    betas: dict[int, float] = {}
    chosen = []
    for n, fold in enumerate(per_fold):
        others = {i: s for m, f in enumerate(per_fold) if m != n for i, s in f.items()}
        beta = heldout.best_beta(reads, others, index)
        chosen.append(beta)
        betas.update({i: beta for i in fold})
    return {
        "command": "python -m slm_fit.reader heldout",
        "recipe": recipe_dict(recipe),
        "folds": [sorted(map(list, split[n])) for n in kept],
        "betas": chosen,
        "training_seconds": [r["training"]["seconds"] for r in results],
        "training": [r["training"] for r in results],
        "held_out": heldout.report(reads, scores, betas),
    }


def run_train(args: argparse.Namespace, recipe: Recipe, beta: float) -> dict[str, Any]:
    from slm_fit.reader_model import BASE_SHA256
    from slm_fit.reader_train import check_published, export, latency, train

    base = {"sha256": BASE_SHA256, **check_published()}
    if not base["published"]:
        raise SystemExit(f"the base weights are not the published model: {base}")
    reads = _reads(args, recipe)
    started = time.perf_counter()
    model, metrics = train(reads, recipe, _say, args.threads, _asks(args, recipe))
    exported = export(model, args.out)
    which = list(range(len(reads)))
    scores = score(args.out, recipe, reads, which)
    (args.work / "final-scores.json").write_text(json.dumps(scores), encoding="utf-8")
    return {
        "command": "python -m slm_fit.reader train",
        "base": base,
        "recipe": recipe_dict(recipe),
        "training": metrics,
        "seconds": round(time.perf_counter() - started, 1),
        "model": exported,
        "latency": latency(args.out, recipe.pieces, reads),
        "beta": beta,
        "in_sample": heldout.report(reads, scores, dict.fromkeys(which, beta)),
    }


def run_curriculum(args: argparse.Namespace, recipe: Recipe) -> dict[str, Any]:
    from slm_bench import learning_data
    from slm_fit import reader_curriculum as curriculum

    plan = curriculum.Plan(
        work=args.work,
        public=args.public,
        stage1=recipe,
        stage2=replace(recipe, epochs=args.stage2_epochs, learning_rate=args.stage2_lr),
        stage1_lists=args.stage1_lists,
        stage2_lists=args.stage2_lists,
        threads=args.threads,
        public_questions=args.public_questions,
        foreign=args.foreign,
    )
    result: dict[str, Any] = {
        "command": "python -m slm_fit.reader curriculum " + " ".join(sys.argv[2:]),
        "stage1": curriculum.stage1(plan, _say),
    }
    if args.stage == 1:
        return result
    reads = _reads(args, recipe)
    cache = args.work / "windows"
    seen = [
        s
        for path in (args.beam, args.locomo)
        for s in learning_data.load(cache / f"{path.stem}.seen.npz")
    ]
    split, logo = curriculum.dev_setup(plan, reads, seen, _say)
    first = curriculum.stage1_on_dev(plan, reads, logo, _say)
    result["stage1_dev"] = curriculum.dev_report(reads, logo, split, first)
    if args.stage == 2:
        kept = sorted(set(args.folds)) if args.folds else list(range(len(split)))
        runs = [curriculum.stage2_fold(plan, reads, split[n], n, logo, _say) for n in kept]
        second = {int(i): s for r in runs for i, s in r["scores"].items()}
        result["stage2"] = {
            "recipe": recipe_dict(plan.stage2),
            "lists": plan.stage2_lists,
            "folds": kept,
            "training": [r["training"] for r in runs],
            "model": [r["model"] for r in runs],
        }
        result["curriculum_dev"] = curriculum.dev_report(reads, logo, split, second)
        # the stage-1 model on the same questions, for a like-for-like comparison
        result["stage1_dev_same_folds"] = curriculum.dev_report(
            reads, logo, split, {i: first[i] for i in second}
        )
    (args.work / "curriculum.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slm_fit.reader", description=__doc__)
    parser.add_argument("command", choices=("check", "heldout", "train", "curriculum"))
    parser.add_argument("--locomo", type=Path, default=Path("../shared/data/locomo-dev.json"))
    parser.add_argument("--beam", type=Path, default=Path("../shared/data/beam-dev.json"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/slm-reader"))
    parser.add_argument("--out", type=Path, help="train: the folder to write")
    parser.add_argument("--report", type=Path, help="also write the JSON report here")
    parser.add_argument("--layers", type=int, default=DEFAULT.layers)
    parser.add_argument("--pieces", type=int, default=DEFAULT.pieces)
    parser.add_argument("--epochs", type=int, default=DEFAULT.epochs)
    parser.add_argument("--group", type=int, default=DEFAULT.group)
    parser.add_argument("--seed", type=int, default=DEFAULT.seed)
    parser.add_argument("--pool", choices=("cls", "mean"), default=DEFAULT.pool)
    parser.add_argument("--easy", type=int, default=DEFAULT.easy)
    parser.add_argument("--lr", type=float, default=DEFAULT.learning_rate)
    parser.add_argument(
        "--dates",
        action=argparse.BooleanOptionalAction,
        default=DEFAULT.dates,
        help="write each memory's event date before its text",
    )
    parser.add_argument("--asks", type=int, default=DEFAULT.asks, help="asking-turn lists an epoch")
    parser.add_argument(
        "--folds", type=int, nargs="+", help="heldout: report these folds only (default all)"
    )
    parser.add_argument("--fold", type=int, help="heldout: train and score this fold only")
    parser.add_argument("--threads", type=int, default=1, help="torch threads to train with")
    parser.add_argument("--beta", type=float, default=1.0, help="train: the blend's beta")
    parser.add_argument(
        "--public",
        type=Path,
        default=Path("../shared/reader-data"),
        help="curriculum: the public sets' folder",
    )
    parser.add_argument(
        "--stage", type=int, choices=(1, 2), default=2, help="curriculum: stop after"
    )
    parser.add_argument(
        "--stage1-lists", type=int, default=0, help="curriculum: public lists an epoch (0: all)"
    )
    parser.add_argument(
        "--public-questions",
        type=int,
        default=0,
        help="curriculum: held-out public questions measured per set and kind (0: all)",
    )
    parser.add_argument(
        "--foreign",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="curriculum: also read other conversations' questions",
    )
    parser.add_argument(
        "--stage2-lists", type=int, default=0, help="curriculum: dev lists an epoch (0: all)"
    )
    parser.add_argument("--stage2-epochs", type=int, default=1)
    parser.add_argument("--stage2-lr", type=float, default=5e-5)
    parser.add_argument(
        "--answerability",
        type=float,
        default=DEFAULT.answerability,
        help="weight of each list's any-row-answers term",
    )
    args = parser.parse_args(argv)
    recipe = replace(
        Recipe(),
        layers=args.layers,
        pieces=args.pieces,
        epochs=args.epochs,
        group=args.group,
        seed=args.seed,
        pool=args.pool,
        easy=args.easy,
        learning_rate=args.lr,
        dates=args.dates,
        asks=args.asks,
        answerability=args.answerability,
    )
    if args.command == "check":
        from slm_fit.reader_model import BASE_SHA256
        from slm_fit.reader_train import check_published

        result: dict[str, Any] = {"sha256": BASE_SHA256, **check_published()}
        print(json.dumps(result, indent=2))
        return 0 if result["published"] else 1
    if args.command == "curriculum":
        result = run_curriculum(args, recipe)
        print(json.dumps(result, indent=2))
        from slm_fit.reader_curriculum import markdown

        for key in ("stage1_dev", "curriculum_dev", "stage1_dev_same_folds"):
            if key in result:
                print(markdown(key, result[key]))
    elif args.command == "heldout":
        result = run_heldout(args, recipe)
        print(json.dumps(result, indent=2))
        if args.fold is None:
            print(heldout.markdown("held out by group", result["held_out"]))
    else:
        if args.out is None:
            parser.error("train needs --out")
        result = run_train(args, recipe, args.beta)
        print(json.dumps(result, indent=2))
        print(heldout.markdown("in sample (trained on every question)", result["in_sample"]))
    if args.report:
        args.report.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
