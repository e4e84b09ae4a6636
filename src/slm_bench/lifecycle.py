"""The lifecycle benchmark: memory that stays true when facts change (``slm bench
lifecycle``; the histories come from ``slm_bench.histories``).

Each history is stored in a fresh SQLite store three times, once per way of knowing that
a note replaces another:

- ``explicit``: every change note names the note it replaces (``supersedes``), as an agent
  that calls ``update`` would;
- ``suggest`` (the default settings): no explicit links; slm links probable updates at
  write time and ranks the current version first;
- ``auto``: the same, with probable updates superseded.

Reported per mode: current-value hit@1 and the stale-first rate (an older version of the
fact ranked above the current one, or returned while the current one is not); the as-of
accuracy (hit@1 of the version that held at a past date, asked with ``as_of``), the same
question in words ("in March 2023", no ``as_of``) and the change questions' hit@1. Links:
how many probable updates were found, how many link two versions of one fact (the
precision; false links are the rest) and how many of the true changes were linked.

With ``--locomo FILE``, also the LoCoMo side: probable updates found among conversation
turns (none is an update: every link is a false one), and LoCoMo hit@10 and recall p50 with
the feature on (the LoCoMo benchmark, run as ``slm bench locomo`` runs it).
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from slm.embed import make_embedder
from slm.engine import Memory, MemoryInput
from slm.settings import Settings
from slm_bench.histories import History, Question, generate
from slm_bench.metrics import percentile
from slm_bench.scale import Precomputed

MODES = ("explicit", "suggest", "auto")
K = 10


def _store(memory: Memory, history: History, mode: str) -> dict[str, str]:
    """Store the history's notes; returns stored id -> note label."""
    if mode != "explicit":
        items = [
            MemoryInput(note.content, event_time=note.time, metadata={"note": note.label})
            for note in history.notes
        ]
        records = memory.remember_many(items)
        return {r.id: str(r.metadata["note"]) for r in records}
    ids: dict[str, str] = {}
    for note in history.notes:  # in time order: what a change replaces is stored before it
        older = history.replaces.get(note.label)
        supersedes = (ids[older],) if older is not None else ()
        record = memory.remember(
            note.content,
            event_time=note.time,
            metadata={"note": note.label},
            supersedes=supersedes,
        )
        ids[note.label] = record.id
    return {stored: label for label, stored in ids.items()}


def _ask(memory: Memory, labels: dict[str, str], question: Question, history: History) -> Any:
    start = time.perf_counter()
    if question.kind == "as_of":
        response = memory.recall(question.text, k=K, as_of=question.as_of)
    else:
        response = memory.recall(question.text, k=K, now=history.now)
    ms = (time.perf_counter() - start) * 1000
    ranked = [labels.get(r.memory.id, "") for r in response.results]
    return ranked, ms


def _stale_first(ranked: list[str], question: Question) -> bool:
    """An older version of the fact comes before the current one (or without it)."""
    for label in ranked:
        if label == question.expected:
            return False
        if label in question.others:
            return True
    return False


def _links(memory: Memory, labels: dict[str, str], history: History) -> dict[str, int]:
    """Probable updates found: all, between versions of one fact, and true changes."""
    facts = {note.label: note.fact for note in history.notes}
    keys = [r.key for r in memory.store.scan(memory.profile, 0, 100_000)]
    found = [u for u in memory.store.versions.updates(memory.profile, keys) if not u.explicit]
    true = 0
    for update in found:
        older, newer = facts.get(labels[update.older_id]), facts.get(labels[update.newer_id])
        true += older is not None and newer is not None and older[:2] == newer[:2]
    changes = len(history.replaces)
    linked = {(labels[u.older_id], labels[u.newer_id]) for u in found} & {
        (old, new) for new, old in history.replaces.items()
    }
    return {"links": len(found), "true_links": true, "changes": changes, "linked": len(linked)}


def run(
    *,
    seed: int = 0,
    histories: int = 30,
    phrasings: str = "dev",
    settings: Settings | None = None,
    locomo: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the benchmark and return the report (see the module docstring)."""
    settings = settings or Settings.from_env(calibration=None)
    data = generate(seed, histories, phrasings)
    model = Precomputed(make_embedder(settings.embedder))  # each text embedded once
    answers: dict[str, list[tuple[Question, list[str]]]] = {mode: [] for mode in MODES}
    times: list[float] = []
    links: Counter[str] = Counter()
    for history in data:
        for mode in MODES:
            policy = "auto" if mode == "auto" else "suggest"
            chosen = replace(settings, update_policy=policy)
            with (
                tempfile.TemporaryDirectory(prefix="slm-lifecycle-") as tmp,
                Memory(Path(tmp) / "m.db", settings=chosen, embedder=model) as memory,
            ):
                labels = _store(memory, history, mode)
                if mode == "suggest":
                    links.update(_links(memory, labels, history))
                for question in history.questions:
                    ranked, ms = _ask(memory, labels, question, history)
                    answers[mode].append((question, ranked))
                    if mode == "suggest":
                        times.append(ms)
        if progress:
            progress(f"{history.name}: {len(history.notes)} notes, {len(history.questions)} q")
    report: dict[str, Any] = {
        "seed": seed,
        "phrasings": phrasings,
        "histories": len(data),
        "notes": sum(len(h.notes) for h in data),
        "questions": Counter(q.kind for h in data for q in h.questions),
        "modes": {mode: _score(answers[mode]) for mode in MODES},
        "links": {
            **links,
            "false_link_share": round(1 - links["true_links"] / links["links"], 4)
            if links["links"]
            else 0.0,
            "changes_linked": round(links["linked"] / max(links["changes"], 1), 4),
        },
        "latency_ms": {
            "p50": round(percentile(times, 50), 3),
            "p95": round(percentile(times, 95), 3),
        },
    }
    if locomo is not None:
        report["locomo"] = _locomo(locomo, settings, progress)
    return report


def _hit1(rows: Sequence[tuple[Question, list[str]]]) -> float:
    return round(sum(r[:1] == [q.expected] for q, r in rows) / max(len(rows), 1), 4)


def _score(rows: list[tuple[Question, list[str]]]) -> dict[str, Any]:
    kinds: dict[str, list[tuple[Question, list[str]]]] = {}
    for question, ranked in rows:
        kinds.setdefault(question.kind, []).append((question, ranked))
    current = kinds.get("current", [])
    return {
        "current_hit@1": _hit1(current),
        "current_hit@10": round(sum(q.expected in r for q, r in current) / max(len(current), 1), 4),
        "stale_first": round(sum(_stale_first(r, q) for q, r in current) / max(len(current), 1), 4),
        "as_of_hit@1": _hit1(kinds.get("as_of", [])),
        "past_in_words_hit@1": _hit1(kinds.get("past", [])),
        "change_hit@1": _hit1(kinds.get("when", [])),
    }


def _locomo(
    path: Path, settings: Settings, progress: Callable[[str], None] | None
) -> dict[str, Any]:
    """LoCoMo turns: probable updates among them (every one a false link), and the LoCoMo
    benchmark's hit@10 and recall p50 with the feature on."""
    from slm_bench import locomo

    conversations, _ = locomo.load(path)
    turns = found = 0
    for conversation in conversations:  # the real model: changes are also found by meaning
        with (
            tempfile.TemporaryDirectory(prefix="slm-lifecycle-") as tmp,
            Memory(Path(tmp) / "m.db", settings=settings) as memory,
        ):
            memory.remember_many(conversation.turns)
            turns += len(conversation.turns)
            found += memory.store.versions.update_count(memory.profile)
    report = locomo.run(path, settings=settings, progress=progress)
    return {
        "turns": turns,
        "false_links": found,
        "false_links_per_turn": round(found / max(turns, 1), 4),
        "hit@10": report["overall"]["hit@10"],
        "recall_p50_ms": report["latency_ms"]["p50"],
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"lifecycle: {report['histories']} histories, {report['notes']} notes, "
        f"questions {dict(report['questions'])} (seed {report['seed']}, "
        f"{report['phrasings']} phrasings)",
        "",
        "| mode | current hit@1 | stale-first | as_of hit@1 | past in words hit@1 | change hit@1 |",
        "|---|---|---|---|---|---|",
    ]
    for mode, row in report["modes"].items():
        lines.append(
            f"| {mode} | {row['current_hit@1']:.3f} | {row['stale_first']:.3f} | "
            f"{row['as_of_hit@1']:.3f} | {row['past_in_words_hit@1']:.3f} | "
            f"{row['change_hit@1']:.3f} |"
        )
    links = report["links"]
    lines += [
        "",
        f"probable updates (suggest): {links['links']} found, {links['true_links']} between "
        f"versions of one fact (false-link share {links['false_link_share']:.3f}); "
        f"{links['linked']} of {links['changes']} changes linked "
        f"({links['changes_linked']:.3f})",
        f"recall latency (suggest): p50 {report['latency_ms']['p50']:.1f} ms, "
        f"p95 {report['latency_ms']['p95']:.1f} ms",
    ]
    if "locomo" in report:
        lo = report["locomo"]
        lines.append(
            f"LoCoMo: {lo['false_links']} false links in {lo['turns']} turns "
            f"({lo['false_links_per_turn']:.2%}); hit@10 {lo['hit@10']:.3f}, "
            f"recall p50 {lo['recall_p50_ms']:.1f} ms"
        )
    return "\n".join(lines)
