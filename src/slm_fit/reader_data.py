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
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
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
) -> list[Read]:
    """Every question's window, one fresh SQLite store per group (``settings`` without a
    reranker: the window is read before it, then ordered by the shipped model)."""
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
    reads = collect(path, Settings.from_env(rerank=False, calibration=None), progress)
    save(reads, kept)
    return reads
