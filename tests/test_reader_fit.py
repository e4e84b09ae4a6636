"""The reader's fitting mechanism (slm_fit.reader_train): a tiny random encoder built in
torch is trained a step, exported to int8 ONNX and read by slm's reader stage. The quality
of a trained reader is measured by ``python -m slm_fit.reader heldout``, not here."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def _vocabulary() -> bytes:
    from slm.embed.minilm import model_files

    try:
        return model_files()[1].read_bytes()
    except Exception as exc:  # the embedder's packages are not installed
        pytest.skip(f"no tokenizer: {exc}")


def _tiny() -> object:
    from slm_fit.reader_model import CrossEncoder, Encoder, Shape

    torch.manual_seed(0)
    return CrossEncoder(Encoder(Shape(hidden=32, heads=2, inner=64, layers=1)))


def test_a_tiny_reader_exports_and_reads(tmp_path: Path) -> None:
    from slm.recall.reader import Reader
    from slm_fit.reader_train import export

    written = export(_tiny(), tmp_path, _vocabulary())
    assert Path(written["file"]).stat().st_size == written["bytes"]
    reader = Reader(tmp_path, top=5, pieces=32)
    scores = reader.scores("When did Ana move?", ["Ana moved to Porto in May", "cats", "x " * 200])
    assert scores.shape == (3,)
    assert np.isfinite(scores).all()


def test_the_loss_prefers_the_positive() -> None:
    from slm_fit.reader_train import _loss

    labels = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0])
    good = _loss(torch.tensor([3.0, -1.0, -1.0, -2.0, 2.0]), labels, [3, 2], 0.1)
    bad = _loss(torch.tensor([-1.0, 3.0, -1.0, 2.0, -2.0]), labels, [3, 2], 0.1)
    assert float(good) < float(bad)


def test_training_lists_hold_evidence_and_hard_negatives() -> None:
    from slm_fit.reader_data import Read
    from slm_fit.reader_train import Recipe, lists

    read = Read("f", "g", "own", "q?", tuple(f"m{i}" for i in range(10)), (0, 0, 1) + (0,) * 7)
    foreign = Read("f", "g", "foreign", "q?", ("m0",), (0,))
    (only,) = lists([read, foreign], Recipe(group=4), random.Random(0))
    assert only == [("q?", "m2", 1), ("q?", "m0", 0), ("q?", "m1", 0), ("q?", "m3", 0)]
