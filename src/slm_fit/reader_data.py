"""What the reader learns from and is tested on: each question of a dev file asked of its
group's store (a LoCoMo conversation, a BEAM instance), kept as the window slm returns.

A :class:`Read` is one question's recall window (the top 50 before reranking,
``slm_bench.learning_data``) put in the shipped reranker's order (what recall returns with
the reranker on, the default), each row with its memory's text and its label (evidence for
the question or not). slm's own top candidates are thus the hard negatives. Three kinds of
question are kept:

- ``own``: a scored question of the group (its evidence labels the rows);
- ``foreign``: a question of the next group in the file, asked of this one (nothing
  answers it: BENCHMARK.md section 1's abstention check);
- ``unanswerable``: a question of the group marked ``answerable: false`` (BEAM).

The recipe is this code; the windows are written to a cache outside the repository (the
dev files are licensed for evaluation only and nothing copied from them is committed).
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path

from slm.embed import make_embedder
from slm.engine import Memory
from slm.learn.model import Ranker, default_ranker, order
from slm.settings import Settings
from slm_bench import learning_data as data
from slm_bench import retrieval
from slm_bench.learning_data import Asked, Group

#: Questions of the next group asked of each group, at most.
FOREIGN = 40
#: An asking turn's window: the answer, this many nearest other turns, then random others.
NEAREST = 19
OTHERS = 10


@dataclass(frozen=True, slots=True)
class Read:
    """One question's window in the default order (best first)."""

    file: str
    group: str
    kind: str  # "own", "foreign" or "unanswerable"
    question: str
    texts: tuple[str, ...]
    labels: tuple[int, ...]

    @property
    def answered(self) -> bool:
        return any(self.labels)


def _unanswerable(path: str | Path) -> dict[str, list[Asked]]:
    """BEAM's ``answerable: false`` questions by instance (none in a LoCoMo file)."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    if not (isinstance(raw, dict) and "instances" in raw):
        return {}
    _, instances = retrieval.load(path)
    return {
        i.id: [Asked(q.text, q.kind, frozenset()) for q in i.questions if not q.answerable]
        for i in instances
    }


def collect(
    path: str | Path,
    settings: Settings,
    progress: Callable[[str], None] | None = None,
    foreign: int = FOREIGN,
    seen_out: list[data.Seen] | None = None,
) -> list[Read]:
    """Every question's window, one fresh SQLite store per group (``settings`` without a
    reranker: the window is read before it, then ordered by the shipped model); each
    window as read (its features, for a reranker trained without its group) is appended to
    ``seen_out``, one per read."""
    name = Path(path).stem
    embedder = make_embedder(settings.embedder)
    ranker = default_ranker()
    groups = data.groups(path)
    unanswerable = _unanswerable(path)
    reads: list[Read] = []
    for i, group in enumerate(groups):
        asked = [("own", q) for q in group.questions]
        nxt = groups[(i + 1) % len(groups)]
        asked += [("foreign", Asked(q.text, q.kind, frozenset())) for q in nxt.questions[:foreign]]
        asked += [("unanswerable", q) for q in unanswerable.get(group.name, [])]
        with (
            tempfile.TemporaryDirectory(prefix="slm-reader-") as tmp,
            Memory(Path(tmp) / "bench.db", settings=settings, embedder=embedder) as memory,
        ):
            ids = retrieval.store_all(memory, group.memories, retrieval.Refused({}), group.id_key)
            contents = _contents(group)
            for (kind, question), seen in zip(
                asked, data.examples(memory, group, ids, [q for _, q in asked]), strict=True
            ):
                reads.append(_read(name, group.name, kind, question.text, seen, ranker, contents))
                if seen_out is not None:
                    seen_out.append(seen)
        if progress:
            progress(f"{name} {group.name}: {len(asked)} questions")
    return reads


def _contents(group: Group) -> dict[str, str]:
    return {
        str(m.metadata[group.id_key]): m.content  # type: ignore[index]
        for m in group.memories
    }


def _read(
    file: str,
    group: str,
    kind: str,
    question: str,
    seen: data.Seen,
    ranker: Ranker,
    contents: dict[str, str],
) -> Read:
    rows = order(ranker, seen.example)
    return Read(
        file,
        group,
        kind,
        question,
        tuple(contents.get(seen.ids[r], "") for r in rows),
        tuple(int(seen.example.labels[r] or 0) for r in rows),
    )


def save(reads: Sequence[Read], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([asdict(r) for r in reads]), encoding="utf-8")


def load(path: Path) -> list[Read]:
    return [
        Read(r["file"], r["group"], r["kind"], r["question"], tuple(r["texts"]), tuple(r["labels"]))
        for r in json.loads(path.read_text(encoding="utf-8"))
    ]


def load_or_collect(
    path: str | Path,
    cache: Path,
    progress: Callable[[str], None] | None = None,
) -> list[Read]:
    """The windows of a dev file, read from ``cache`` (a directory) when there."""
    kept = cache / f"{Path(path).stem}.reads.json"
    if kept.exists():
        return load(kept)
    seen: list[data.Seen] = []
    reads = collect(
        path, Settings.from_env(rerank=False, calibration=None), progress, seen_out=seen
    )
    save(reads, kept)
    data.save(seen, cache / f"{Path(path).stem}.seen.npz")
    return reads


def when(event_time: datetime | str | None) -> str:
    """A memory's event date as the reader sees it: ``"[8 May 2023] "`` (empty without one)."""
    if event_time is None:
        return ""
    if isinstance(event_time, str):
        try:
            event_time = datetime.fromisoformat(event_time)
        except ValueError:
            return f"[{event_time}] "
    return f"[{event_time.day} {event_time:%B %Y}] "


def dated(reads: Sequence[Read], paths: Sequence[str | Path]) -> list[Read]:
    """``reads`` with each memory's text prefixed by its event date (:func:`when`), found by
    its text among its group's memories (the first memory with that text: a handful of BEAM
    messages repeat, none of LoCoMo's turns)."""
    dates: dict[tuple[str, str], dict[str, str]] = {}
    for path in paths:
        for group in data.groups(path):
            kept = dates.setdefault((Path(path).stem, group.name), {})
            for m in group.memories:
                kept.setdefault(m.content, when(m.event_time))
    out = []
    for read in reads:
        known = dates.get((read.file, read.group), {})
        texts = tuple(known.get(t, "") + t if t else t for t in read.texts)
        out.append(replace(read, texts=texts))
    return out


def asks(path: str | Path, seed: int = 0) -> list[Read]:
    """The supervision a conversation carries without labels, as windows of kind ``ask``:
    each turn that asks (its text ends with ``?``) whose next turn is the other speaker's.
    The asking turn is the question; the window is that next turn (the answer, label 1),
    the :data:`NEAREST` other turns of the same group nearest the asking turn by slm's
    embedder (hard negatives: on topic, but not the reply), then :data:`OTHERS` random
    turns of the group (below the top 20, as :class:`Read` windows put easier rows). The
    turns next to the asking one (two either side) are never negatives: they may answer
    it too."""
    import numpy as np

    name = Path(path).stem
    embedder = make_embedder(Settings.from_env().embedder)
    rng = random.Random(seed)
    out: list[Read] = []
    for group in data.groups(path):
        turns = group.memories
        asking = [
            i
            for i in range(len(turns) - 1)
            if turns[i].content.rstrip().endswith("?") and turns[i].source != turns[i + 1].source
        ]
        if not asking:
            continue
        vectors = np.asarray(embedder.embed_batch([t.content for t in turns]), dtype=np.float32)
        for i in asking:
            near = np.argsort(-(vectors @ vectors[i]), kind="stable")
            others = [int(j) for j in near if abs(int(j) - i) > 2]
            nearest = others[:NEAREST]
            rest = others[NEAREST:]
            rows = [i + 1, *nearest, *rng.sample(rest, min(len(rest), OTHERS))]
            out.append(
                Read(
                    name,
                    group.name,
                    "ask",
                    turns[i].content,
                    tuple(turns[j].content for j in rows),
                    (1,) + (0,) * (len(rows) - 1),
                )
            )
    return out


def load_or_find_asks(path: str | Path, cache: Path) -> list[Read]:
    """:func:`asks` of a dev file, read from ``cache`` (a directory) when there."""
    kept = cache / f"{Path(path).stem}.asks.json"
    if kept.exists():
        return load(kept)
    found = asks(path)
    save(found, kept)
    return found
