"""History sets written by hand (BENCHMARK.md section 4): facts that change, stored with no
explicit links, and on-topic questions nothing answers (``slm bench lifecycle --data``).

A set is one JSON file ``{"histories": [...], "unanswerable": [...]}``. A history follows
one attribute ("user residence", "Tara's employer") through its ``memories`` (each ``id``,
``role`` fact or distractor, ``content``, ``event_time``), names its ``changes`` (pairs
``[old fact id, new fact id]``) and asks ``questions`` (``kind`` current or past,
``question``, optional ``as_of``, the ``expected`` fact and, for current ones, the
``superseded`` facts). ``unanswerable`` holds on-topic questions whose answer was never
stored.

Every memory of every history goes into one store, one ``remember`` at a time in time
order, with no ``supersedes``: what links a change is slm's own reading. Then every
question is asked with k=10. Reported: current@1 (the current fact first), stale-first (a
superseded fact above the current one, or the current one missing from the ten), current
hit@10, past hit@1 and hit@10, links found by the engine, how many are gold changes and how
many are not (false links), the share of gold changes linked, abstentions, and the AUROC
of the top ``relevance_score`` between answerable and unanswerable questions.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from slm.embed import make_embedder
from slm.engine import Memory
from slm.errors import InvalidInput
from slm.settings import Settings
from slm_bench.metrics import auroc, percentile
from slm_bench.scale import Precomputed

K = 10


@dataclass(frozen=True, slots=True)
class Asked:
    """One question of a set, as scored: ``expected`` None for an unanswerable one."""

    id: str
    kind: str
    text: str
    expected: str | None
    superseded: tuple[str, ...] = ()
    as_of: str | None = None


@dataclass(frozen=True, slots=True)
class HistorySet:
    memories: list[dict[str, Any]]  # every memory of every history, in time order
    changes: set[tuple[str, str]]
    questions: list[Asked]
    histories: int


def load(path: Path) -> HistorySet:
    """Read a set, checking the references a score depends on (:class:`InvalidInput`
    saying what is wrong, before anything is stored)."""
    try:
        return _read(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"cannot read {path}: {exc}") from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise InvalidInput(
            f"{path} is not a history set (BENCHMARK.md section 4): {exc!r}"
        ) from None
    except ValueError as exc:
        raise InvalidInput(f"{path}: {exc}") from None


def _read(data: dict[str, Any]) -> HistorySet:
    memories: list[dict[str, Any]] = []
    changes: set[tuple[str, str]] = set()
    questions: list[Asked] = []
    for history in data["histories"]:
        ids = {m["id"] for m in history["memories"]}
        memories += history["memories"]
        for old, new in history.get("changes", []):
            if old not in ids or new not in ids:
                raise ValueError(f"history {history['id']}: change {old} -> {new} is unknown")
            changes.add((old, new))
        for q in history.get("questions", []):
            if q["expected"] not in ids:
                raise ValueError(f"question {q['id']}: expected {q['expected']} is unknown")
            questions.append(
                Asked(
                    q["id"],
                    q["kind"],
                    q["question"],
                    q["expected"],
                    tuple(q.get("superseded", ())),
                    q.get("as_of"),
                )
            )
    questions += [
        Asked(u["id"], "unanswerable", u["question"], None) for u in data.get("unanswerable", [])
    ]
    memories.sort(key=lambda m: (_time(m["event_time"]), m["id"]))
    return HistorySet(memories, changes, questions, len(data["histories"]))


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def run(
    path: Path,
    *,
    settings: Settings | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Store the set, ask its questions and return the report (module docstring)."""
    settings = settings or Settings.from_env(calibration=None)
    data = load(path)
    model = Precomputed(make_embedder(settings.embedder))
    with (
        tempfile.TemporaryDirectory(prefix="slm-histories-") as tmp,
        Memory(Path(tmp) / "m.db", settings=settings, embedder=model) as memory,
    ):
        labels: dict[str, str] = {}
        write_ms: list[float] = []
        for item in data.memories:
            start = time.perf_counter()
            record = memory.remember(
                item["content"], event_time=item["event_time"], metadata={"note": item["id"]}
            )
            write_ms.append((time.perf_counter() - start) * 1000)
            labels[record.id] = item["id"]
        if progress:
            progress(f"stored {len(labels)} memories")
        answers = [_ask(memory, labels, q) for q in data.questions]
        links = _links(memory, labels, data.changes)
    report = _score(data, answers)
    report["links"] = links
    report["write_ms_p50"] = round(percentile(write_ms, 50), 3)
    report["policy"] = settings.update_policy
    report["data"] = path.name
    return report


def _ask(
    memory: Memory, labels: dict[str, str], question: Asked
) -> tuple[Asked, list[str], float, bool, float]:
    start = time.perf_counter()
    response = memory.recall(question.text, k=K, as_of=question.as_of)
    ms = (time.perf_counter() - start) * 1000
    ranked = [labels.get(r.memory.id, "") for r in response.results]
    top = response.results[0].relevance_score if response.results else 0.0
    return question, ranked, top, response.abstained, ms


def _links(memory: Memory, labels: dict[str, str], gold: set[tuple[str, str]]) -> dict[str, Any]:
    keys = [r.key for r in memory.store.scan(memory.profile, 0, 1_000_000)]
    found = {
        (labels[u.older_id], labels[u.newer_id])
        for u in memory.store.versions.updates(memory.profile, keys)
    }
    true = found & gold
    false = sorted(found - gold)
    return {
        "found": len(found),
        "gold_linked": len(true),
        "false_links": len(false),
        "changes": len(gold),
        "changes_linked": round(len(true) / max(len(gold), 1), 4),
        "precision": round(len(true) / len(found), 4) if found else None,
        "false_examples": [list(pair) for pair in false[:20]],
    }


def _rate(values: Sequence[bool]) -> float:
    return round(sum(values) / max(len(values), 1), 4)


def _stale_first(ranked: list[str], question: Asked) -> bool:
    for label in ranked:
        if label == question.expected:
            return False
        if label in question.superseded:
            return True
    return True  # the current fact is not among the ten


def _score(
    data: HistorySet, answers: list[tuple[Asked, list[str], float, bool, float]]
) -> dict[str, Any]:
    current = [(q, r) for q, r, _, _, _ in answers if q.kind == "current"]
    past = [(q, r) for q, r, _, _, _ in answers if q.kind == "past"]
    answerable = [a for a in answers if a[0].expected is not None]
    unanswerable = [a for a in answers if a[0].expected is None]
    times = [a[4] for a in answers]
    return {
        "histories": data.histories,
        "memories": len(data.memories),
        "questions": {
            "current": len(current),
            "past": len(past),
            "unanswerable": len(unanswerable),
        },
        "current@1": _rate([r[:1] == [q.expected] for q, r in current]),
        "stale_first": _rate([_stale_first(r, q) for q, r in current]),
        "current_hit@10": _rate([q.expected in r for q, r in current]),
        "past_hit@1": _rate([r[:1] == [q.expected] for q, r in past]),
        "past_hit@10": _rate([q.expected in r for q, r in past]),
        "abstained_answerable": _rate([a[3] for a in answerable]),
        "abstained_unanswerable": _rate([a[3] for a in unanswerable]),
        "unanswerable_auroc": round(
            auroc([a[2] for a in answerable], [a[2] for a in unanswerable]), 4
        )
        if unanswerable
        else None,
        "recall_ms_p50": round(percentile(times, 50), 3),
    }


def markdown(report: dict[str, Any]) -> str:
    links = report["links"]
    return "\n".join(
        [
            f"history set {report['data']}: {report['histories']} histories, "
            f"{report['memories']} memories, questions {report['questions']} "
            f"(update policy {report['policy']})",
            "",
            "| current@1 | stale-first | current hit@10 | past hit@1 | past hit@10 | "
            "unanswerable AUROC | abstained (answerable) |",
            "|---|---|---|---|---|---|---|",
            f"| {report['current@1']:.3f} | {report['stale_first']:.3f} | "
            f"{report['current_hit@10']:.3f} | {report['past_hit@1']:.3f} | "
            f"{report['past_hit@10']:.3f} | {report['unanswerable_auroc']} | "
            f"{report['abstained_answerable']:.3f} |",
            "",
            f"links: {links['found']} found, {links['gold_linked']} of {links['changes']} "
            f"changes linked ({links['changes_linked']:.3f}), {links['false_links']} false "
            f"(precision {links['precision']})",
            f"write p50 {report['write_ms_p50']:.1f} ms, recall p50 "
            f"{report['recall_ms_p50']:.1f} ms",
        ]
    )
