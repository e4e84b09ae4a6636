"""Training the reader and exporting it for slm's reader stage (``slm.recall.reader``).

The model is :class:`slm_fit.reader_model.CrossEncoder` on the first ``layers`` layers of
all-MiniLM-L6-v2. Each training question (a :class:`slm_fit.reader_data.Read` of kind
``own`` with its evidence in the window) gives one list: its evidence rows (at most
``Recipe.positives``) and the highest-ranked rows of slm's default order that are not
evidence, ``Recipe.group`` rows in all. The loss is the listwise softmax cross-entropy of
the list (minus the log of the softmax mass on its positives) plus ``Recipe.bce`` times
the pointwise binary cross-entropy of each row. Every pair is the tokenizer's pair encoding
``[CLS] question [SEP] memory [SEP]``, cut to ``Recipe.pieces`` word pieces as the reader
stage cuts it.

The export is ONNX (inputs ``input_ids``, ``attention_mask``, ``token_type_ids``; output one
logit per pair), quantised to int8 by onnxruntime's dynamic quantisation, with the base
model's ``tokenizer.json`` beside it.
"""

from __future__ import annotations

import hashlib
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slm_fit.reader_data import Read


@dataclass(frozen=True, slots=True)
class Recipe:
    layers: int = 3
    pieces: int = 96
    group: int = 6
    positives: int = 2
    questions_per_step: int = 4
    epochs: int = 2
    learning_rate: float = 1e-4
    head_learning_rate: float = 1e-3
    bce: float = 0.1
    seed: int = 0
    pool: str = "mean"
    #: Of each list's negatives, this many are drawn from below the window's top 20
    #: (easier: on topic, but not what slm put first).
    easy: int = 2
    #: Each memory's event date written before its text (``"[8 May 2023] ..."``,
    #: :func:`slm_fit.reader_data.dated`), in training and when scored.
    dates: bool = False
    #: Lists drawn each epoch (without replacement) from the conversations' own asking
    #: turns and their replies (:func:`slm_fit.reader_data.asks`; 0: none).
    asks: int = 0
    #: Weight of each list's answerability term (:func:`_loss`; 0: none).
    answerability: float = 0.0


def lists(
    reads: Sequence[Read], recipe: Recipe, rng: random.Random
) -> list[list[tuple[str, str, int]]]:
    """One list of (question, memory, label) per answered training question (and per
    asking turn: windows of kind ``ask``)."""
    out = []
    for read in reads:
        if read.kind == "unanswerable" and recipe.answerability:
            # nothing answers: slm's top rows, all negatives (the answerability term)
            rows = [i for i, t in enumerate(read.texts) if t][: recipe.group]
            if rows:
                out.append([(read.question, read.texts[i], 0) for i in rows])
            continue
        if read.kind not in ("own", "ask") or not read.answered:
            continue
        positives = [i for i, label in enumerate(read.labels) if label and read.texts[i]]
        if not positives:
            continue
        chosen = rng.sample(positives, min(len(positives), recipe.positives))
        negatives = [i for i, label in enumerate(read.labels) if not label and read.texts[i]]
        hard, below = [i for i in negatives if i < 20], [i for i in negatives if i >= 20]
        easy = rng.sample(below, min(len(below), recipe.easy))
        rows = chosen + hard[: recipe.group - len(chosen) - len(easy)] + easy
        out.append([(read.question, read.texts[i], read.labels[i]) for i in rows])
    return out


def sampled_lists(
    reads: Sequence[Read], recipe: Recipe, rng: random.Random
) -> list[list[tuple[str, str, int]]]:
    """One list per question of a public set (:mod:`slm_fit.reader_public`), whose rows
    are in their dialogue's order, not ranked: its answers (at most ``Recipe.positives``)
    and negatives drawn at random from the same dialogue, ``Recipe.group`` rows in all
    (shuffled); an unanswerable question's list is all negatives (with
    ``Recipe.answerability``; else it is left out)."""
    out = []
    for read in reads:
        positives = [i for i, label in enumerate(read.labels) if label and read.texts[i]]
        if not positives and not (read.kind == "unanswerable" and recipe.answerability):
            continue
        chosen = rng.sample(positives, min(len(positives), recipe.positives))
        negatives = [i for i, label in enumerate(read.labels) if not label and read.texts[i]]
        rows = chosen + rng.sample(negatives, min(len(negatives), recipe.group - len(chosen)))
        if not rows:
            continue
        rng.shuffle(rows)
        out.append([(read.question, read.texts[i], read.labels[i]) for i in rows])
    return out


def tokenizer(pieces: int, vocabulary: bytes | None = None) -> Any:
    """The base model's tokenizer (slm's embedder's vocabulary, or ``vocabulary``: a
    ``tokenizer.json``), cutting pairs as the reader stage does."""
    from tokenizers import Tokenizer

    from slm_fit.reader_model import base_files

    text = (vocabulary or base_files()[1]).decode("utf-8")
    tok = Tokenizer.from_str(text)
    tok.enable_truncation(max_length=pieces)
    tok.enable_padding()
    return tok


def encode(tok: Any, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    import torch

    encoded = tok.encode_batch(list(pairs))
    return {
        "input_ids": torch.tensor([e.ids for e in encoded], dtype=torch.long),
        "attention_mask": torch.tensor([e.attention_mask for e in encoded], dtype=torch.long),
        "token_type_ids": torch.tensor([e.type_ids for e in encoded], dtype=torch.long),
    }


def train(
    reads: Sequence[Read],
    recipe: Recipe,
    progress: Callable[[str], None] | None = None,
    threads: int = 1,
    asked: Sequence[Read] = (),
) -> tuple[Any, dict[str, Any]]:
    """A cross-encoder trained on ``reads`` (and ``Recipe.asks`` lists an epoch drawn from
    ``asked``: windows of kind ``ask``), and the run's metrics. One thread by default: on
    this shared two-core machine one thread trained five times faster than two."""
    import torch

    from slm_fit.reader_model import CrossEncoder, load_base

    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    model = CrossEncoder(load_base(recipe.layers), recipe.pool)
    epochs = [
        lists(reads, recipe, rng)
        + lists(rng.sample(list(asked), min(len(asked), recipe.asks)), recipe, rng)
        for _ in range(recipe.epochs)
    ]
    metrics = fit(model, epochs, recipe, rng, progress, threads)
    return model, {**metrics, "asks_available": len(asked)}


Lists = list[list[tuple[str, str, int]]]


def fit(
    model: Any,
    epochs: Sequence[Lists],
    recipe: Recipe,
    rng: random.Random,
    progress: Callable[[str], None] | None = None,
    threads: int = 1,
    checkpoint: Path | None = None,
    every: int = 100,
    vocabulary: bytes | None = None,
) -> dict[str, Any]:
    """Train ``model`` on ``epochs`` (each a list of lists of (question, memory, label)),
    ``Recipe.questions_per_step`` lists a step, and return the run's metrics. A list with
    no positive (an unanswerable question) adds only its pointwise and answerability
    terms (:func:`_loss`). With ``checkpoint`` (a file) the model, optimiser, schedule and
    random states are saved every ``every`` steps and at the end, and a run finds its
    saved state there and continues from it (the same ``epochs`` and seed give the same
    steps). ``vocabulary``: a ``tokenizer.json`` other than the base model's."""
    import torch

    torch.set_num_threads(threads)
    # The word embeddings stay as published: a third of the weights, and the vocabulary
    # the few thousand training questions would move least usefully.
    model.encoder.words.weight.requires_grad_(False)
    tok = tokenizer(recipe.pieces, vocabulary)
    head = list(model.head.parameters())
    body = [p for n, p in model.named_parameters() if not n.startswith("head.") and p.requires_grad]
    optimiser = torch.optim.AdamW(
        [
            {"params": body, "lr": recipe.learning_rate},
            {"params": head, "lr": recipe.head_learning_rate},
        ],
        weight_decay=0.01,
    )
    batches = []
    for epoch in epochs:
        shuffled = list(epoch)
        rng.shuffle(shuffled)
        batches += [
            shuffled[start : start + recipe.questions_per_step]
            for start in range(0, len(shuffled), recipe.questions_per_step)
        ]
    steps = len(batches)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser,
        lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))),
    )
    step, pairs, losses, spent = 0, 0, [], 0.0
    if checkpoint is not None and checkpoint.exists():
        state = torch.load(checkpoint, weights_only=False)
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        schedule.load_state_dict(state["schedule"])
        torch.set_rng_state(state["torch_rng"])
        step, pairs, losses, spent = (
            state["step"],
            state["pairs"],
            state["losses"],
            state["seconds"],
        )
        if progress:
            progress(f"resumed at step {step}/{steps} from {checkpoint}")

    def save() -> None:
        if checkpoint is None:
            return
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        partial = checkpoint.with_suffix(".partial")
        torch.save(
            {
                "model": model.state_dict(),
                "optimiser": optimiser.state_dict(),
                "schedule": schedule.state_dict(),
                "torch_rng": torch.get_rng_state(),
                "step": step,
                "pairs": pairs,
                "losses": losses,
                "seconds": spent + time.perf_counter() - started,
            },
            partial,
        )
        partial.replace(checkpoint)

    model.train()
    started, resumed_pairs = time.perf_counter(), pairs
    while step < steps:
        chunk = batches[step]
        flat = [row for group in chunk for row in group]
        logits = model(**encode(tok, [(q, m) for q, m, _ in flat]))
        labels = torch.tensor([float(y) for _, _, y in flat])
        loss = _loss(logits, labels, [len(g) for g in chunk], recipe.bce, recipe.answerability)
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        step, pairs = step + 1, pairs + len(flat)
        losses.append(float(loss.detach()))
        if progress and step % 20 == 0:
            rate = (pairs - resumed_pairs) / (time.perf_counter() - started)
            progress(f"step {step}/{steps} loss {np.mean(losses[-20:]):.3f} {rate:.1f} pairs/s")
        if step % every == 0 or step == steps:
            save()
    model.eval()
    seconds = spent + time.perf_counter() - started
    return {
        "recipe": asdict(recipe),
        "questions": len(epochs[0]) if epochs else 0,
        "steps": step,
        "pairs": pairs,
        "seconds": round(seconds, 1),
        "pairs_per_second": round(pairs / max(seconds, 1e-9), 1),
        "loss_first_20": round(float(np.mean(losses[:20])), 4) if losses else None,
        "loss_last_20": round(float(np.mean(losses[-20:])), 4) if losses else None,
    }


def _loss(
    logits: Any, labels: Any, sizes: Sequence[int], bce: float, answerability: float = 0.0
) -> Any:
    """Per list: the listwise softmax cross-entropy (the mass on its positives; none for
    a list without one) and ``answerability`` x the binary cross-entropy of whether any
    row answers (:func:`answers`: noisy-OR of the rows' probabilities); plus ``bce`` x the
    pointwise BCE of every row."""
    import torch

    total = torch.zeros(())
    start = 0
    for size in sizes:
        part, wanted = logits[start : start + size], labels[start : start + size]
        answered = bool((wanted > 0.5).any())
        if answered:
            positive = part.masked_fill(wanted < 0.5, float("-inf"))
            total = total + torch.logsumexp(part, 0) - torch.logsumexp(positive, 0)
        if answerability:
            # log P(no row answers) = sum of log(1 - p_i)
            none = torch.nn.functional.logsigmoid(-part).sum()
            if answered:
                total = total - answerability * torch.log(-torch.expm1(none.clamp(max=-1e-6)))
            else:
                total = total - answerability * none
        start += size
    pointwise = torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)
    return total / len(sizes) + bce * pointwise


def export(model: Any, folder: Path, vocabulary: bytes | None = None) -> dict[str, Any]:
    """``folder/model.onnx`` (int8) and ``folder/tokenizer.json`` (the base model's, or
    ``vocabulary``); what was written."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from slm_fit.reader_model import base_files

    vocabulary = vocabulary or base_files()[1]
    folder.mkdir(parents=True, exist_ok=True)
    model.eval()
    example = encode(tokenizer(32, vocabulary), [("what is it?", "a memory"), ("why?", "because")])
    names = ["input_ids", "attention_mask", "token_type_ids"]
    with tempfile.TemporaryDirectory(prefix="slm-reader-export-") as tmp:
        full = Path(tmp) / "model-fp32.onnx"
        torch.onnx.export(
            model,
            tuple(example[n] for n in names),
            str(full),
            input_names=names,
            output_names=["logits"],
            dynamic_axes={**{n: {0: "pairs", 1: "pieces"} for n in names}, "logits": {0: "pairs"}},
            opset_version=17,
            dynamo=False,
        )
        quantize_dynamic(str(full), str(folder / "model.onnx"), weight_type=QuantType.QInt8)
    (folder / "tokenizer.json").write_bytes(vocabulary)
    blob = (folder / "model.onnx").read_bytes()
    return {
        "file": str(folder / "model.onnx"),
        "bytes": len(blob),
        "sha256": hashlib.sha256(blob).hexdigest(),
    }


def latency(folder: Path, pieces: int, reads: Sequence[Read], repeats: int = 20) -> dict[str, Any]:
    """Milliseconds for onnxruntime to read 20 pairs at ``pieces`` word pieces, with 2
    threads and with 1 (the reader stage's), median over ``repeats`` questions."""
    import onnxruntime as ort

    tok = tokenizer(pieces)
    asked = [r for r in reads if len(r.texts) >= 20][:repeats]
    out: dict[str, Any] = {"pieces": pieces, "pairs": 20}
    for threads in (2, 1):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        session = ort.InferenceSession(
            str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        times = []
        for read in asked:
            encoded = encode(tok, [(read.question, t) for t in read.texts[:20]])
            feed = {k: v.numpy() for k, v in encoded.items()}
            started = time.perf_counter()
            session.run(None, feed)
            times.append((time.perf_counter() - started) * 1000)
        out[f"ms_{threads}_threads"] = round(float(np.median(times[1:] or times)), 1)
    return out


def check_published(sentences: Sequence[str] | None = None) -> dict[str, Any]:
    """The base encoder (all six layers, mean-pooled, normalised) against slm's int8
    embedder: the cosine of each sentence's two embeddings. Above 0.98 for every sentence
    means the weights are the published model's, up to int8 quantisation."""
    import torch

    from slm.embed.minilm import MiniLMEmbedder
    from slm_fit.reader_model import load_base, pooled

    texts = list(
        sentences
        or [
            "Priya is allergic to cats.",
            "Deploys happen on Thursdays after the standup.",
            "When did Maya move to Lisbon?",
            "I switched the database from MySQL to Postgres last night.",
            "The quick brown fox jumps over the lazy dog.",
        ]
    )
    encoder = load_base(6).eval()
    tok = tokenizer(256)
    tok.no_padding()
    ours = []
    with torch.no_grad():
        for text in texts:
            batch = _single(tok, text)
            hidden = encoder(**batch)
            ours.append(pooled(hidden, batch["attention_mask"])[0].numpy())
    theirs = MiniLMEmbedder().embed_batch(texts)
    cosines = [float(np.dot(a, np.asarray(b))) for a, b in zip(ours, theirs, strict=True)]
    return {
        "cosines": [round(c, 4) for c in cosines],
        "min": round(min(cosines), 4),
        "published": min(cosines) > 0.98,
    }


def _single(tok: Any, text: str) -> dict[str, Any]:
    import torch

    e = tok.encode(text)
    return {
        "input_ids": torch.tensor([e.ids]),
        "attention_mask": torch.tensor([e.attention_mask]),
        "token_type_ids": torch.tensor([e.type_ids]),
    }
