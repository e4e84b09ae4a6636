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


def _generic(tmp_path: Path) -> Path:
    import json

    turns = [
        ("user", "I adopted a cat last week.", "2024-03-15T09:00:00"),
        ("assistant", "Lovely! What is her name?", "2024-03-15T09:01:00"),
        ("user", "Her name is Miso.", "2024-03-15T09:02:00"),
        ("assistant", "Miso is a great name.", "2024-03-15T09:03:00"),
        ("user", "Do cats like tuna?", "2024-04-02T10:00:00"),
        ("assistant", "Most do, in small amounts.", "2024-04-02T10:01:00"),
        ("user", "I moved to Porto in May.", "2024-05-20T08:00:00"),
        ("assistant", "How is Porto treating you?", "2024-05-20T08:01:00"),
    ]
    memories = [
        {"id": f"m{i}", "content": f"{who}: {text}", "source": who, "event_time": at}
        for i, (who, text, at) in enumerate(turns)
    ]
    path = tmp_path / "tiny-dev.json"
    path.write_text(
        json.dumps({"instances": [{"id": "i1", "memories": memories, "questions": []}]}),
        encoding="utf-8",
    )
    return path


def test_the_date_is_written_before_the_memory(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from slm_fit.reader_data import Read, dated, when

    assert when(datetime(2023, 5, 8, 13, 56, tzinfo=UTC)) == "[8 May 2023] "
    assert when("2024-03-15T00:00:00") == "[15 March 2024] "
    assert when(None) == ""
    read = Read("tiny-dev", "i1", "own", "q?", ("user: Her name is Miso.", "unknown"), (1, 0))
    (out,) = dated([read], [_generic(tmp_path)])
    assert out.texts == ("[15 March 2024] user: Her name is Miso.", "unknown")


def test_asking_turns_give_their_reply_as_the_positive(tmp_path: Path) -> None:
    from slm_fit.reader_data import asks
    from slm_fit.reader_train import Recipe, lists

    try:
        found = asks(_generic(tmp_path))
    except Exception as exc:  # the embedder's packages are not installed
        pytest.skip(f"no embedder: {exc}")
    # the last asking turn has no reply; the one before each reply asks
    assert [a.question for a in found] == [
        "assistant: Lovely! What is her name?",
        "user: Do cats like tuna?",
    ]
    first = found[0]
    assert first.kind == "ask" and first.labels[0] == 1 and not any(first.labels[1:])
    assert first.texts[0] == "user: Her name is Miso."
    # turns within two of the asking one are never its negatives
    assert not {"user: I adopted a cat last week.", "assistant: Miso is a great name."} & set(
        first.texts[1:]
    )
    (lst, _) = lists(found, Recipe(group=3, easy=0), random.Random(0))
    assert lst[0] == (first.question, first.texts[0], 1) and len(lst) == 3
