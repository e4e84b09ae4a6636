"""The optional reader (slm.recall.reader): a cross-encoder of the user's own, here a small
ONNX model this test builds (it scores a pair by how often a chosen word piece occurs in
it), with MiniLM's tokenizer beside it."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slm import Memory, Settings
from slm.embed.minilm import model_files
from slm.errors import ModelError
from slm.recall.reader import Reader

onnx = pytest.importorskip("onnx")
WORD = "pistachio"


def build_reader(folder: Path, word: str = WORD, inputs: tuple[str, ...] = ()) -> Path:
    """A cross-encoder stand-in: logit = number of times ``word``'s first piece occurs."""
    from onnx import TensorProto, helper
    from tokenizers import Tokenizer

    _, tokenizer_file = model_files()
    shutil.copy(tokenizer_file, folder / "tokenizer.json")
    piece = Tokenizer.from_file(str(tokenizer_file)).encode(word, add_special_tokens=False).ids[0]
    names = inputs or ("input_ids", "attention_mask", "token_type_ids")
    graph = helper.make_graph(
        [
            helper.make_node("Equal", ["input_ids", "piece"], ["hit"]),
            helper.make_node("Cast", ["hit"], ["hits"], to=TensorProto.FLOAT),
            helper.make_node("ReduceSum", ["hits", "axes"], ["logits"], keepdims=1),
        ],
        "reader",
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["n", "l"]) for n in names],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 1])],
        [
            helper.make_tensor("piece", TensorProto.INT64, [], [piece]),
            helper.make_tensor("axes", TensorProto.INT64, [1], [1]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = folder / "model.onnx"
    onnx.save(model, str(path))
    return path


def test_the_reader_scores_pairs(tmp_path: Path) -> None:
    reader = Reader(build_reader(tmp_path), top=5, pieces=64)
    scores = reader.scores("which ice cream?", ["pistachio", "vanilla", "pistachio pistachio"])
    assert list(scores) == [1.0, 0.0, 2.0]
    assert reader.describe() == {"model": str(tmp_path / "model.onnx"), "top": 5, "pieces": 64}
    # the budget: a pair is cut to its word pieces, the word past the cut is not read
    short = Reader(tmp_path, pieces=8)
    assert list(short.scores("q", ["one two three four five six seven pistachio"])) == [0.0]


def test_a_recall_is_reordered_by_the_reader(store_at: dict[str, Any], tmp_path: Path) -> None:
    path = build_reader(tmp_path)
    notes = [
        {"content": "Ana's favourite ice cream flavour is vanilla"},
        {"content": "Ana ordered ice cream at the beach"},
        {"content": "Ana likes pistachio best of all"},
    ]
    with Memory(**store_at, settings=replace(Settings(), rerank=False)) as plain:
        plain.remember_many(notes)
        before = plain.recall("Which ice cream flavour does Ana like?", k=3)
    with Memory(**store_at, settings=replace(Settings(), rerank=False, reader=str(path))) as read:
        after = read.recall("Which ice cream flavour does Ana like?", k=3, trace=True)
        assert read.health()["reader"] == {"model": str(path), "top": 20, "pieces": 256}
    assert after.results[0].memory.content == "Ana likes pistachio best of all"
    assert {r.id: r.relevance_score for r in after.results} == {
        r.id: r.relevance_score for r in before.results
    }
    assert after.abstained == before.abstained
    assert after.trace is not None
    stage = after.trace["reader"]
    assert stage["read"] == 3 and stage["ms"] >= 0 and stage["model"].endswith("model.onnx")


def test_a_bad_reader_is_refused_when_the_store_opens(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        Memory(tmp_path / "m.db", settings=replace(Settings(), reader=str(tmp_path / "x.onnx")))
    odd = tmp_path / "odd"
    odd.mkdir()
    build_reader(odd, inputs=("input_ids", "pixels"))
    with pytest.raises(ModelError, match="a cross-encoder takes"):
        Reader(odd)
    (odd / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(ModelError, match="cannot load"):
        Reader(odd)


def test_reader_settings_are_checked() -> None:
    from slm.errors import ConfigError

    with pytest.raises(ConfigError, match="reader_top"):
        Settings(reader_top=0)
    with pytest.raises(ConfigError, match="reader_top"):
        Settings(reader_pieces=4)
    with pytest.raises(ConfigError, match="SLM_READER_TOP is not a whole number"):
        Settings.from_env({"SLM_READER_TOP": "many"})
    chosen = Settings.from_env({"SLM_READER": " m.onnx ", "SLM_READER_TOP": "5"})
    assert chosen.reader == "m.onnx" and chosen.reader_top == 5 and chosen.reader_pieces == 256


def test_a_calibration_knows_the_reader_by_its_files(tmp_path: Path) -> None:
    from test_calibration import artefact_for, filled, write

    from slm.errors import CalibrationError

    folder = tmp_path / "reader"
    folder.mkdir()
    build_reader(folder)
    settings = Settings(embedder="fake", reader=str(folder))
    with Memory(tmp_path / "m.db", settings=settings) as memory:
        artefact = write(tmp_path / "calib.json", artefact_for(filled(memory)))
    # The same model in another folder is the same reader.
    moved = shutil.copytree(folder, tmp_path / "moved")
    with Memory(
        tmp_path / "m.db", settings=replace(settings, reader=str(moved), calibration=str(artefact))
    ) as memory:
        assert memory.recall("boiler", k=5).answer_confidence is not None
    # Another model at the same path reorders otherwise, as does no reader: both refused.
    build_reader(folder, word="vanilla")
    for other in (settings, replace(settings, reader=None)):
        with pytest.raises(CalibrationError, match="reader: artefact 'reader-"):
            Memory(tmp_path / "m.db", settings=replace(other, calibration=str(artefact)))
