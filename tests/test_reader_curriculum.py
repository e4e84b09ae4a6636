"""The reader's curriculum (slm_fit.reader_public, slm_fit.reader_curriculum and the
training loop of slm_fit.reader_train): the public sets read into lists, held out by
dialogue, and a tiny model the test builds trained on tiny data, stopped and resumed from
its checkpoint. The quality of a real reader is measured by ``python -m slm_fit.reader
curriculum``, never here (CI does not train)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from slm_fit import reader_public
from slm_fit.reader_curriculum import answers, choose_beta, largest, ranked
from slm_fit.reader_data import Read


def _public(tmp_path: Path) -> Path:
    """The three sets' layouts, a dialogue or two each."""
    edus = [
        {"speaker": "ana", "text": "how do i mount a usb drive ?"},
        {"speaker": "bo", "text": "use the mount command with the device path"},
        {"speaker": "cy", "text": "anyone tried the new kernel ?"},
    ]
    context = " ".join(f"{e['speaker']}: {e['text']}" for e in edus)
    answer = "use the mount command"
    molweni = {
        "data": {
            "dialogues": [
                {
                    "edus": edus,
                    "context": context,
                    "relations": [],
                    "qas": [
                        {
                            "question": "How does ana mount the drive ?",
                            "id": "q1",
                            "answers": [{"text": answer, "answer_start": context.index(answer)}],
                            "is_impossible": False,
                        },
                        {
                            "question": "Which kernel did cy install ?",
                            "id": "q2",
                            "answers": [],
                            "is_impossible": True,
                        },
                    ],
                }
            ]
        }
    }
    friends = {
        "data": [
            {
                "title": "s01_e01_c01",
                "paragraphs": [
                    {
                        "utterances:": [
                            {"uid": 0, "speakers": ["Ross Geller"], "utterance": "Hi ."},
                            {"uid": 1, "speakers": ["Monica Geller"], "utterance": "I cooked."},
                        ],
                        "qas": [
                            {
                                "id": "f1",
                                "question": "Who cooked ?",
                                "answers": [
                                    {
                                        "answer_text": "Monica",
                                        "utterance_id": 1,
                                        "inner_start": -1,
                                        "inner_end": -1,
                                        "is_speaker": True,
                                    }
                                ],
                            }
                        ],
                    }
                ],
            }
        ]
    }
    selqa = [
        {
            "question": "Where is the museum?",
            "candidates": ["It opened in 1965.", "The museum is in Jerusalem."],
            "answers": [1],
            "article": "Israel",
            "section": "Museums",
            "topic": "COUNTRY",
            "is_paraphrase": False,
        }
    ]
    folder = tmp_path / "reader-data"
    for name, value in (
        ("molweni/mrc-test.json", molweni),
        ("friendsqa/friendsqa_dev.json", friends),
        ("friendsqa/friendsqa_tst.json", {"data": []}),
        ("selqa/selqa-ass-dev.json", selqa),
        ("selqa/selqa-ass-test.json", []),
    ):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(json.dumps(value), encoding="utf-8")
    return folder


def test_the_public_sets_become_lists_of_a_dialogues_utterances(tmp_path: Path) -> None:
    reads = reader_public.load(_public(tmp_path))
    answered, impossible, friends, selqa = reads
    assert answered.file == "molweni" and answered.kind == "own"
    assert answered.texts[1] == "bo: use the mount command with the device path"
    assert answered.labels == (0, 1, 0)
    # on topic, nothing answers: a list with no positive
    assert impossible.kind == "unanswerable" and not any(impossible.labels)
    assert friends.texts == ("Ross Geller: Hi .", "Monica Geller: I cooked.")
    assert friends.labels == (0, 1)
    assert (selqa.group, selqa.labels) == ("Israel", (0, 1))
    with pytest.raises(FileNotFoundError, match="no public reading data"):
        reader_public.load(tmp_path / "missing")


def test_the_held_out_split_keeps_whole_dialogues_apart() -> None:
    reads = [
        Read("molweni", f"dialogue-{g}", "own", f"q{g}-{q}", ("a", "b"), (1, 0))
        for g in range(60)
        for q in range(3)
    ]
    train, held = reader_public.split(reads)
    assert train and held and len(train) + len(held) == len(reads)
    assert not {r.group for r in train} & {r.group for r in held}
    # stable: the same groups on every run
    assert reader_public.split(reads) == (train, held)


def test_public_lists_sample_negatives_and_keep_unanswerable_ones() -> None:
    from slm_fit.reader_train import Recipe, sampled_lists

    texts = tuple(f"u{i}" for i in range(10))
    answered = Read("molweni", "d", "own", "q?", texts, (0,) * 7 + (1, 0, 0))
    impossible = Read("molweni", "d", "unanswerable", "z?", texts, (0,) * 10)
    recipe = Recipe(group=4, answerability=1.0)
    first, second = sampled_lists([answered, impossible], recipe, random.Random(0))
    assert len(first) == 4 and sum(y for _, _, y in first) == 1 and ("q?", "u7", 1) in first
    assert len(second) == 4 and not any(y for _, _, y in second)
    # without the answerability term an unanswerable question teaches nothing
    assert len(sampled_lists([answered, impossible], Recipe(group=4), random.Random(0))) == 1


def test_answerability_reads_the_most_probable_rows() -> None:
    assert answers([]) == 0.0 and largest([None]) == 0.0
    assert answers([0.0]) == pytest.approx(0.5)
    # noisy-OR of the top rows: two rows at 0.5 make 0.75
    assert answers([0.0, 0.0, -50.0, None]) == pytest.approx(0.75)
    assert answers([4.0, -4.0]) > answers([-4.0, -4.0])


def test_the_blend_reorders_only_the_top_of_the_base_order() -> None:
    base = list(range(30))
    logits: list[float | None] = [0.0] * 30
    logits[3] = 5.0
    alone = ranked(base, logits, None)
    assert alone[0] == 3 and alone[20:] == base[20:]
    # a large beta keeps the base order's first rows (12 ln 3 > 5 - 0)
    assert ranked(base, logits, 12.0)[:2] == [0, 1]
    # rows that were not read keep their place below the rows that were
    assert ranked([0, 1], [None, 2.0], None) == [1, 0]
    # beta is chosen on the questions given: with the answer first in the base order, the
    # base order wins
    first = Read("f", "g", "own", "q?", ("a", "b"), (1, 0))
    assert choose_beta([(first, [0, 1], [0.0, 3.0])]) > 0.0


def _vocabulary() -> bytes:
    from slm.embed.minilm import model_files

    try:
        return model_files()[1].read_bytes()
    except Exception as exc:  # the embedder's packages are not installed
        pytest.skip(f"no tokenizer: {exc}")


def _tiny() -> Any:
    import torch

    from slm_fit.reader_model import CrossEncoder, Encoder, Shape

    torch.manual_seed(0)
    return CrossEncoder(Encoder(Shape(hidden=32, heads=2, inner=64, layers=1)), pool="mean")


def _lists() -> list[list[tuple[str, str, int]]]:
    """Each question names a colour; its answer is the utterance with that colour."""
    from slm_fit.reader_train import Recipe, sampled_lists

    colours = ["red", "blue", "green", "yellow", "purple", "orange", "black", "white"]
    reads = []
    for i, colour in enumerate(colours * 3):
        texts = tuple(f"the {c} one is here" for c in colours)
        labels = tuple(int(c == colour) for c in colours)
        reads.append(Read("t", str(i), "own", f"where is the {colour} one?", texts, labels))
    reads.append(Read("t", "x", "unanswerable", "where is the pink one?", texts, (0,) * 8))
    return sampled_lists(reads, Recipe(group=4, answerability=0.5), random.Random(0))


class _Stop(Exception):
    pass


def test_a_tiny_reader_learns_and_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    from dataclasses import replace

    torch = pytest.importorskip("torch")
    from slm_fit.reader_train import Recipe, fit

    vocabulary = _vocabulary()
    recipe = replace(
        Recipe(), pieces=16, group=4, questions_per_step=1, answerability=0.5, learning_rate=1e-3
    )
    epochs = [_lists(), _lists()]

    whole = _tiny()
    done = fit(whole, epochs, recipe, random.Random(0), vocabulary=vocabulary)
    assert done["steps"] == 50 and done["loss_last_20"] < done["loss_first_20"]

    def stop(message: str) -> None:
        if message.startswith("step 40/"):
            raise _Stop

    checkpoint = tmp_path / "run.pt"
    stopped = _tiny()
    with pytest.raises(_Stop):
        fit(stopped, epochs, recipe, random.Random(0), stop, 1, checkpoint, 15, vocabulary)
    assert torch.load(checkpoint, weights_only=False)["step"] == 30
    resumed = _tiny()
    said: list[str] = []
    again = fit(
        resumed, epochs, recipe, random.Random(0), said.append, 1, checkpoint, 15, vocabulary
    )
    assert said[0].startswith("resumed at step 30/50")
    assert again["steps"] == 50 and again["pairs"] == done["pairs"]
    # the stopped-and-resumed run ends with the same weights as the one that never stopped
    for (name, a), (_, b) in zip(
        whole.state_dict().items(), resumed.state_dict().items(), strict=True
    ):
        assert torch.allclose(a, b, atol=1e-6), name


def test_the_dev_report_compares_each_order_with_the_reader_on_top() -> None:
    from slm_fit.reader_curriculum import dev_report
    from slm_fit.reader_heldout import folds

    texts = ("a", "b", "c")
    reads = [
        Read("f", f"g{g}", "own", f"q{g}{q}", texts, (0, 0, 1)) for g in range(5) for q in range(4)
    ]
    reads += [Read("f", f"g{g}", "unanswerable", f"z{g}", texts, (0, 0, 0)) for g in range(5)]
    split = folds(reads)
    # the leave-one-group-out order puts the answer second; the reader reads it best
    logo = [[1, 2, 0] for _ in reads]
    scores: dict[int, list[float | None]] = {
        i: [-3.0, -3.0, 3.0] if r.kind == "own" else [-3.0, -3.0, -3.0] for i, r in enumerate(reads)
    }
    report = dev_report(reads, logo, split, scores)
    block = report["f"]
    assert block["default"]["hit@1"] == 0.0 and block["logo"]["hit@1"] == 0.0
    assert block["logo"]["hit@10"] == 1.0 and block["logo"]["mrr@10"] == 0.5
    assert block["default+reader"]["hit@1"] == 1.0 and block["logo+reader"]["hit@1"] == 1.0
    # beta chosen on the other folds, where the reader alone was best
    assert report["betas"]["logo"] == [0.0] * 5 and block["logo+blend"]["hit@1"] == 1.0
    assert block["n_unanswerable"] == 5 and block["auroc_unanswerable_answers"] == 1.0
