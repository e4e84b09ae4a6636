"""Public reading supervision for the reader's first stage (docs/reading.md, issue 64):
Molweni, FriendsQA and SelQA (``../shared/reader-data/``, each Apache-2.0; never copied
into the repository), each question read against every utterance or sentence of its own
dialogue or section.

Each question becomes a :class:`slm_fit.reader_data.Read` whose rows are its dialogue's
utterances (``"speaker: text"``) or its section's sentences, in their own order, labelled
1 where the answer is: the other rows are the hard negatives (same chat, same topic). A
Molweni question marked ``is_impossible`` is a read of kind ``unanswerable`` with no
positive ("on topic but not answered"). The ``group`` is the dialogue (Molweni, FriendsQA)
or the article (SelQA), and :func:`split` holds out whole groups, never trained on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slm_fit.reader_data import Read

#: The three sets, by the name each read carries as its ``file``.
SETS = ("molweni", "friendsqa", "selqa")
#: One group in this many is held out (by a hash of its name: stable across runs).
HELD_OUT_EVERY = 5


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def molweni(folder: Path) -> list[Read]:
    """``molweni/mrc-test.json``: the answer's utterance is the one its ``answer_start``
    (an offset into ``context``, the lowercased ``speaker: text`` utterances joined) falls
    in."""
    reads = []
    for n, dialogue in enumerate(_json(folder / "molweni" / "mrc-test.json")["data"]["dialogues"]):
        edus = dialogue["edus"]
        texts = tuple(f"{e['speaker']}: {e['text']}" for e in edus)
        context = dialogue["context"]
        starts, cursor = [], 0
        for text in texts:
            found = context.find(text.lower(), cursor)
            starts.append(found if found >= 0 else cursor)
            cursor = max(cursor, found + len(text)) if found >= 0 else cursor
        group = f"dialogue-{n}"
        for qa in dialogue["qas"]:
            if qa.get("is_impossible"):
                reads.append(
                    Read("molweni", group, "unanswerable", qa["question"], texts, (0,) * len(texts))
                )
                continue
            rows = {_utterance(starts, texts, a) for a in qa["answers"]}
            rows.discard(-1)
            if not rows:
                continue
            labels = tuple(int(i in rows) for i in range(len(texts)))
            reads.append(Read("molweni", group, "own", qa["question"], texts, labels))
    return reads


def _utterance(starts: Sequence[int], texts: Sequence[str], answer: dict[str, Any]) -> int:
    """The utterance holding ``answer`` (its text must be in it), -1 if none does."""
    wanted = str(answer["text"]).lower()
    at = int(answer.get("answer_start", -1))
    holding = [i for i, t in enumerate(texts) if wanted and wanted in t.lower()]
    if not holding:
        return -1
    # the holding utterance whose span covers the offset, else the nearest before it
    before = [i for i in holding if starts[i] <= at]
    return before[-1] if before else holding[0]


def friendsqa(folder: Path) -> list[Read]:
    """``friendsqa/friendsqa_{dev,tst}.json``: each answer names its ``utterance_id``."""
    reads = []
    for name in ("friendsqa_dev.json", "friendsqa_tst.json"):
        for scene in _json(folder / "friendsqa" / name)["data"]:
            for p, paragraph in enumerate(scene["paragraphs"]):
                key = next(k for k in paragraph if k.startswith("utterances"))
                utterances = paragraph[key]
                texts = tuple(
                    f"{', '.join(u.get('speakers') or ['?'])}: {u['utterance']}" for u in utterances
                )
                index = {int(u["uid"]): i for i, u in enumerate(utterances)}
                group = f"{scene['title']}-{p}"
                for qa in paragraph["qas"]:
                    rows = {index.get(int(a["utterance_id"]), -1) for a in qa["answers"]}
                    rows.discard(-1)
                    if not rows:
                        continue
                    labels = tuple(int(i in rows) for i in range(len(texts)))
                    reads.append(Read("friendsqa", group, "own", qa["question"], texts, labels))
    return reads


def selqa(folder: Path) -> list[Read]:
    """``selqa/selqa-ass-{dev,test}.json``: ``answers`` index ``candidates``; grouped by
    article (a section's questions share its sentences, an article's its topic)."""
    reads = []
    for name in ("selqa-ass-dev.json", "selqa-ass-test.json"):
        for item in _json(folder / "selqa" / name):
            texts = tuple(item["candidates"])
            rows = {int(i) for i in item["answers"]}
            labels = tuple(int(i in rows) for i in range(len(texts)))
            kind = "own" if any(labels) else "unanswerable"
            reads.append(Read("selqa", str(item["article"]), kind, item["question"], texts, labels))
    return reads


def load(folder: Path) -> list[Read]:
    """All three sets' questions (see the module's docstring)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"no public reading data at {folder} (../shared/reader-data)")
    return molweni(folder) + friendsqa(folder) + selqa(folder)


def held_out(read: Read) -> bool:
    """Whether ``read``'s group is in the held-out split (one group in
    :data:`HELD_OUT_EVERY`, by a hash of set and group)."""
    digest = hashlib.sha256(f"{read.file}/{read.group}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % HELD_OUT_EVERY == 0


def split(reads: Sequence[Read]) -> tuple[list[Read], list[Read]]:
    """(train, held out), whole groups on one side."""
    return [r for r in reads if not held_out(r)], [r for r in reads if held_out(r)]
