"""``slm bench hooks``: conversations replayed as Claude Code sessions through the real hook
commands (docs/hooks.md).

Each conversation is a project (a folder with ``.git``) and each of its sessions a host
session: a transcript in Claude Code's JSONL layout written turn by turn, the
``UserPromptSubmit`` hook run as a process for every user turn before it is written, the
``Stop`` hook after every assistant turn, ``SessionStart`` and ``SessionEnd`` around the
session, all with the documented payloads on stdin, against one store and one warm process
started by the first hook. A LoCoMo conversation's two speakers are the user (the first to
speak) and the assistant, each turn's text led by the speaker's name, as a chat pasted into
a host reads; a BEAM conversation's roles are its own, in sessions of :data:`BEAM_SESSION`
messages.

Then, in a new session of the same project, each benchmark question is asked as a prompt,
after all the turns it refers to, and the block the hook injects is checked for the
question's evidence (a memory whose text is an evidence turn's). Prompts nothing stored
answers are asked the same way: the questions of another conversation, the BEAM questions
marked unanswerable, and ordinary coding prompts (``bench-data/coding-prompts.json``).

The prompts are asked with minimum relevance 0 and the journal keeps every candidate's
relevance, so the block at any minimum is rebuilt exactly (:func:`slm.hosts.hooks.inject.fit`)
and the whole trade-off over the minimum 0..1 is reported (and plotted with ``--plot``).
Latency is the hook process's wall time as the host waits for it, warm (the process up)
and cold (the first prompt, which starts it); a capture's is the time from the ``Stop``
hook spooling it to its turns stored.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from slm.engine import Memory
from slm.errors import install_hint
from slm.hosts.hooks.inject import DEFAULT_RULE, PROMPT_HEAD, Rule
from slm_bench import locomo

#: Messages per session of a BEAM conversation (it has no sessions of its own).
BEAM_SESSION = 20
#: The gates of the trade-off.
MINIMUMS = tuple(round(i * 0.05, 2) for i in range(21))
#: What "prompts nothing answers" counts (as the issue names them): another conversation's
#: questions and the ordinary coding prompts. BEAM's own unanswerable questions and the
#: blind coding prompts are reported on their own lines.
UNANSWERED_KINDS = ("other conversation", "coding")
#: The most a replayed host allows the prompt hook (generous: the bench reports the time).
WAIT = "30"


@dataclass(frozen=True, slots=True)
class Turn:
    role: str
    text: str
    time: str
    key: str


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    evidence: frozenset[str]
    kind: str


@dataclass
class Case:
    name: str
    sessions: list[list[Turn]]
    questions: list[Question]
    unanswerable: list[str] = field(default_factory=list)


def load_locomo(path: Path) -> list[Case]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    cases = []
    for sample in raw:
        sessions: dict[int, list[Turn]] = {}
        user = None
        for number, when, turn in locomo._turns(sample):
            user = user or turn["speaker"]
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [image: {turn['blip_caption']}]"
            role = "user" if turn["speaker"] == user else "assistant"
            stamp = when.isoformat().replace("+00:00", "Z")
            sessions.setdefault(number, []).append(Turn(role, text, stamp, turn["dia_id"]))
        cleaning = locomo.Cleaning()
        questions = []
        for qa in sample.get("qa", []):
            evidence = locomo.clean_evidence(qa.get("evidence", []), cleaning)
            if evidence and int(qa["category"]) in locomo.SCORED_CATEGORIES:
                questions.append(Question(str(qa["question"]), evidence, str(qa["category"])))
        cases.append(Case(str(sample["sample_id"]), list(sessions.values()), questions))
    return cases


def load_beam(path: Path) -> list[Case]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    cases = []
    for instance in raw["instances"]:
        turns = []
        for m in instance["memories"]:
            role = m["source"] if m["source"] in ("user", "assistant") else "user"
            text = m["content"].split(": ", 1)[1] if ": " in m["content"] else m["content"]
            turns.append(Turn(role, text, m["event_time"] + "Z", m["id"]))
        sessions = [turns[i : i + BEAM_SESSION] for i in range(0, len(turns), BEAM_SESSION)]
        questions, unanswerable = [], []
        for q in instance["questions"]:
            if q["answerable"] and q["evidence_ids"]:
                questions.append(Question(q["question"], frozenset(q["evidence_ids"]), q["type"]))
            elif not q["answerable"]:
                unanswerable.append(q["question"])
        cases.append(Case(instance["id"], sessions, questions, unanswerable))
    return cases


class Host:
    """A replaying host: hook processes run with payloads on stdin, as Claude Code runs them."""

    def __init__(self, root: Path, db: Path) -> None:
        self.root, self.db = root, db
        found = shutil.which("slm-hook", path=str(Path(sys.executable).parent))
        self.command = [found] if found else [sys.executable, "-m", "slm.hosts.hooks.thin"]
        self.env = {
            **os.environ,
            "SLM_HOME": str(root / "home"),
            "SLM_HOOK_MIN_RELEVANCE": "0",
            "SLM_HOOK_WAIT_PROMPT": WAIT,
            "SLM_HOOK_WAIT_START": WAIT,
            "SLM_HOOK_IDLE": "600",
        }

    def hook(self, event: str, payload: dict[str, Any]) -> tuple[float, str]:
        """Run the hook; its wall time in ms and its stdout."""
        began = time.perf_counter()
        done = subprocess.run(
            [*self.command, "claude-code", event, "--db", str(self.db)],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=self.env,
            timeout=120,
        )
        return (time.perf_counter() - began) * 1000, done.stdout

    def hooks_dir(self) -> Path:
        return self.root / "home" / "hooks"

    def journal(self) -> list[dict[str, Any]]:
        out = []
        for path in self.hooks_dir().glob("journal-*.jsonl"):
            out += [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
        return out

    def drained(self, seconds: float = 600) -> None:
        deadline = time.monotonic() + seconds
        while any((self.hooks_dir() / "spool").glob("[0-9]*.json")):
            if time.monotonic() > deadline:
                raise RuntimeError("the warm process did not drain the spool")
            time.sleep(0.05)

    def stop(self) -> None:
        try:
            pid = json.loads((self.hooks_dir() / "worker.json").read_text())["pid"]
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError, KeyError):
            pass


def _line(turn: Turn, session: str) -> str:
    content: Any = turn.text if turn.role == "user" else [{"type": "text", "text": turn.text}]
    message: dict[str, Any] = {"role": turn.role, "content": content}
    if turn.role == "assistant":
        message["model"] = "replay"
    record = {"type": turn.role, "message": message, "uuid": str(uuid.uuid4()),
              "timestamp": turn.time, "sessionId": session, "isSidechain": False}  # fmt: skip
    return json.dumps(record) + "\n"


@dataclass
class Replay:
    """What one data set's replay measured."""

    asked: list[dict[str, Any]] = field(default_factory=list)
    prompt_ms: list[float] = field(default_factory=list)
    stop_ms: list[float] = field(default_factory=list)
    start_ms: list[float] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)


def replay(
    host: Host,
    cases: Sequence[Case],
    coding: Sequence[str],
    blind: Sequence[str],
    progress: Callable[[str], None],
    *,
    turn_prompts: bool = True,
) -> Replay:
    out = Replay()
    for number, case in enumerate(cases):
        project = host.root / "projects" / case.name
        (project / ".git").mkdir(parents=True, exist_ok=True)
        for index, turns in enumerate(case.sessions):
            session = f"{case.name}-s{index}"
            transcript = host.root / "transcripts" / f"{session}.jsonl"
            transcript.parent.mkdir(exist_ok=True)
            base = {"session_id": session, "transcript_path": str(transcript), "cwd": str(project)}
            ms, _ = host.hook("SessionStart", {**base, "hook_event_name": "SessionStart",
                                               "source": "startup"})  # fmt: skip
            out.start_ms.append(ms)
            for turn in turns:
                if turn.role == "user" and turn_prompts:
                    ms, _ = host.hook(
                        "UserPromptSubmit",
                        {**base, "hook_event_name": "UserPromptSubmit", "prompt": turn.text},
                    )
                    out.prompt_ms.append(ms)
                with open(transcript, "a", encoding="utf-8") as stream:
                    stream.write(_line(turn, session))
                if turn.role == "assistant":
                    ms, _ = host.hook("Stop", {**base, "hook_event_name": "Stop"})
                    out.stop_ms.append(ms)
            host.hook("SessionEnd", {**base, "hook_event_name": "SessionEnd", "reason": "exit"})
        host.drained()
        progress(f"{case.name}: {sum(map(len, case.sessions))} turns captured")
        other = cases[(number + 1) % len(cases)] if len(cases) > 1 else None
        asks: list[tuple[str, str, Question | None]] = [
            ("question", q.text, q) for q in case.questions
        ]
        if other is not None:
            asks += [("other conversation", q.text, None) for q in other.questions]
        asks += [("unanswerable", text, None) for text in case.unanswerable]
        asks += [("coding", text, None) for text in coding]
        asks += [("coding blind", text, None) for text in blind]
        for kind, text, question in asks:
            session = f"{case.name}-ask"
            payload = {"session_id": session, "transcript_path": str(host.root / "none.jsonl"),
                       "cwd": str(project), "hook_event_name": "UserPromptSubmit",
                       "prompt": text}  # fmt: skip
            ms, _ = host.hook("UserPromptSubmit", payload)
            out.prompt_ms.append(ms)
            out.asked.append({"case": case.name, "kind": kind, "question": question,
                              "session": session, "ms": ms})  # fmt: skip
        progress(f"{case.name}: {len(asks)} prompts asked")
    return out


def _candidates(host: Host, replayed: Replay) -> None:
    """Give each asked prompt the candidates its journal line holds (in order per session)."""
    lines: dict[str, list[dict[str, Any]]] = {}
    for entry in sorted(host.journal(), key=lambda e: e["time"]):
        if entry.get("event") == "UserPromptSubmit" and str(entry.get("session")).endswith("-ask"):
            lines.setdefault(entry["session"], []).append(entry)
    seen: dict[str, int] = {}
    for asked in replayed.asked:
        index = seen.get(asked["session"], 0)
        seen[asked["session"]] = index + 1
        entry = lines[asked["session"]][index]
        asked["abstained"] = entry["why"] == "abstained"
        asked["worker_ms"] = entry.get("ms")  # the warm process's share of the hook's time
        asked["candidates"] = entry.get("candidates", [])


def _keys(db: Path, cases: Sequence[Case], ids: set[str]) -> dict[str, str]:
    """Memory id -> the benchmark key (dia_id, memory id) of the turn it holds."""
    by_text = {" ".join(t.text.split()): t.key for c in cases for s in c.sessions for t in s}
    out = {}
    with Memory(db) as memory:
        for record in memory.get_many(sorted(ids)):
            text = record.content.split(": ", 1)[1] if ": " in record.content else record.content
            key = by_text.get(" ".join(text.split()))
            if key is not None:
                out[record.id] = key
    return out


def block_at(asked: dict[str, Any], rule: Rule) -> list[str]:
    """The ids the block injected for ``asked`` holds under ``rule`` (the hook's own
    selection, :meth:`Rule.select`, on the candidates the journal kept)."""
    if asked["abstained"]:
        return []
    found = [(str(c[0]), float(c[1]), int(c[2])) for c in asked["candidates"]]
    return [found[i][0] for i, _ in rule.select(found)]


def chars_at(asked: dict[str, Any], rule: Rule) -> int:
    if asked["abstained"]:
        return 0
    found = [(str(c[0]), float(c[1]), int(c[2])) for c in asked["candidates"]]
    chosen = rule.select(found)
    if not chosen:
        return 0
    labels = sum(len(f"- [2000-01-01 | relevance {found[i][1]:.2f} | id {found[i][0]}] ") + 1
                 for i, _ in chosen)  # fmt: skip
    return len(PROMPT_HEAD) + labels + sum(room for _, room in chosen)


def tradeoff(
    asked: Sequence[dict[str, Any]], keys: dict[str, str], rule: Rule = DEFAULT_RULE
) -> list[dict[str, Any]]:
    """Over the gate 0..1, the rest of ``rule`` as it is: evidence in the block, characters
    a prompt, and how often something is injected for each kind of prompt nothing answers."""
    rows = []
    positives = [a for a in asked if a["kind"] == "question"]
    for minimum in MINIMUMS:
        at = replace(rule, gate=minimum)
        row: dict[str, Any] = {"minimum": minimum}
        held = [
            any(keys.get(i) in a["question"].evidence for i in block_at(a, at)) for a in positives
        ]
        row["evidence_in_block"] = _share(held)
        row["chars_per_prompt"] = round(sum(chars_at(a, at) for a in asked) / max(1, len(asked)), 1)
        row["shown_per_block"] = round(
            sum(len(b) for b in (block_at(a, at) for a in positives) if b)
            / max(1, sum(1 for a in positives if block_at(a, at))),
            2,
        )
        for kind in ("other conversation", "unanswerable", "coding", "coding blind"):
            some = [bool(block_at(a, at)) for a in asked if a["kind"] == kind]
            if some:
                row[f"injected_{kind.replace(' ', '_')}"] = _share(some)
        negatives = [bool(block_at(a, at)) for a in asked if a["kind"] in UNANSWERED_KINDS]
        row["injected_unanswered"] = _share(negatives)
        rows.append(row)
    return rows


def prompts_kept(asked: Sequence[dict[str, Any]], keys: dict[str, str]) -> list[dict[str, Any]]:
    """Each asked prompt's kind, abstention and candidates (id, relevance, length, whether it
    is an evidence turn of the question), so another rule can be scored without a replay."""
    out = []
    for a in asked:
        evidence = a["question"].evidence if a["question"] is not None else frozenset()
        out.append({"case": a["case"], "kind": a["kind"], "abstained": a["abstained"],
                    "candidates": [[*c[:3], keys.get(c[0]) in evidence]
                                   for c in a["candidates"]]})  # fmt: skip
    return out


#: The rules :func:`sweep_rules` scores: each floor, share of the top, and most shown.
FLOORS = (0.0, 0.2, 0.3, 0.4, 0.5)
RATIOS = (0.0, 0.5, 0.6, 0.7, 0.8)
MOSTS = (3, 4, 5, 6, 8, 10)


def score(prompts: Sequence[dict[str, Any]], rule: Rule) -> dict[str, float | None]:
    """Evidence in the block, and injection where nothing answers, for kept prompts
    (:func:`prompts_kept`) under ``rule``."""
    held, unanswered = [], []
    for kept in prompts:
        found = [(str(c[0]), float(c[1]), int(c[2])) for c in kept["candidates"]]
        chosen = [] if kept["abstained"] else rule.select(found)
        if kept["kind"] == "question":
            held.append(any(kept["candidates"][i][3] for i, _ in chosen))
        elif kept["kind"] in UNANSWERED_KINDS:
            unanswered.append(bool(chosen))
    return {"evidence_in_block": _share(held), "injected_unanswered": _share(unanswered)}


def sweep_rules(
    sets: dict[str, dict[str, Any]], ceiling: float = 0.15, keep: int = 10
) -> list[dict[str, Any]]:
    """For each floor, share of the top and most shown (budget as shipped), the lowest gate
    at which every set injects for at most ``ceiling`` of the prompts nothing answers, and
    the evidence then in the block; the ``keep`` best by the mean over the sets."""
    rows: list[dict[str, Any]] = []
    for floor in FLOORS:
        for ratio in RATIOS:
            for most in MOSTS:
                for gate in MINIMUMS:
                    rule = replace(DEFAULT_RULE, gate=gate, floor=floor, ratio=ratio, most=most)
                    found = {name: score(s["prompts"], rule) for name, s in sets.items()}
                    if all((f["injected_unanswered"] or 0) <= ceiling for f in found.values()):
                        mean = sum(f["evidence_in_block"] or 0 for f in found.values())
                        rows.append({"gate": gate, "floor": floor, "ratio": ratio, "most": most,
                                     "evidence_in_block_mean": round(mean / len(found), 4),
                                     **found})  # fmt: skip
                        break
    rows.sort(key=lambda r: (-float(r["evidence_in_block_mean"]), -float(r["floor"]),
                             -float(r["ratio"]), int(r["most"])))  # fmt: skip
    return rows[:keep]


def _share(flags: Sequence[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def _percentiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None, "n": 0}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"p50": at(0.5), "p95": at(0.95), "n": len(ordered)}


def run(
    locomo_file: Path,
    beam_file: Path,
    coding_file: Path,
    *,
    blind_file: Path | None = None,
    conversations: int | None = None,
    turn_prompts: bool = True,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    coding = json.loads(coding_file.read_text(encoding="utf-8"))["prompts"]
    blind = json.loads(blind_file.read_text(encoding="utf-8"))["prompts"] if blind_file else []
    data = {
        "locomo-dev": load_locomo(locomo_file)[:conversations],
        "beam-dev": load_beam(beam_file)[:conversations],
    }
    report: dict[str, Any] = {"minimums": list(MINIMUMS), "sets": {}}
    with tempfile.TemporaryDirectory(prefix="slm-bench-hooks-") as folder:
        root = Path(folder)
        host = Host(root, root / "memory.db")
        try:
            report["cold"] = _cold(host)
            for name, cases in data.items():
                replayed = replay(host, cases, coding, blind, progress, turn_prompts=turn_prompts)
                _candidates(host, replayed)
                ids = {c[0] for a in replayed.asked for c in a["candidates"]}
                keys = _keys(host.db, cases, ids)
                report["sets"][name] = {
                    "conversations": len(cases),
                    "turns": sum(len(s) for c in cases for s in c.sessions),
                    "questions": sum(a["kind"] == "question" for a in replayed.asked),
                    "unanswered_prompts": sum(
                        a["kind"] in UNANSWERED_KINDS for a in replayed.asked
                    ),
                    "tradeoff": tradeoff(replayed.asked, keys),
                    "prompts": prompts_kept(replayed.asked, keys),
                    "prompt_hook_ms_warm": _percentiles(replayed.prompt_ms),
                    "prompt_worker_ms": _percentiles(
                        [a["worker_ms"] for a in replayed.asked if a.get("worker_ms") is not None]
                    ),
                    "stop_hook_ms": _percentiles(replayed.stop_ms),
                    "start_hook_ms": _percentiles(replayed.start_ms),
                }
                progress(f"{name}: done")
            captures = [e for e in host.journal() if e.get("after_ms") is not None]
            report["capture_stored_ms"] = _percentiles([e["after_ms"] for e in captures])
            report["capture_turns_max"] = max((e["turns"] for e in captures), default=0)
            report["first_use_500_turns"] = _first_use(host, data["locomo-dev"][0])
        finally:
            host.stop()
    report["chosen"] = choose(report)
    report["rules"] = sweep_rules(report["sets"])
    return report


def _cold(host: Host) -> dict[str, Any]:
    """The first prompt hook of a user with no warm process (it starts one and waits for
    the model), then the same prompt warm."""
    project = host.root / "projects" / "cold"
    (project / ".git").mkdir(parents=True)
    payload = {"session_id": "cold", "transcript_path": str(host.root / "none.jsonl"),
               "cwd": str(project), "hook_event_name": "UserPromptSubmit",
               "prompt": "What did we decide about the database?"}  # fmt: skip
    cold, _ = host.hook("UserPromptSubmit", payload)
    warm, _ = host.hook("UserPromptSubmit", payload)
    return {"prompt_hook_ms_cold": round(cold, 1), "prompt_hook_ms_warm_after": round(warm, 1)}


def _first_use(host: Host, case: Case) -> dict[str, Any]:
    """A 500-turn session captured by its first Stop (a transcript from before slm)."""
    turns = [t for s in case.sessions for t in s][:500]
    project = host.root / "projects" / "first-use"
    (project / ".git").mkdir(parents=True)
    transcript = host.root / "transcripts" / "first-use.jsonl"
    transcript.write_text("".join(_line(t, "first-use") for t in turns), encoding="utf-8")
    payload = {"session_id": "first-use", "transcript_path": str(transcript),
               "cwd": str(project), "hook_event_name": "Stop"}  # fmt: skip
    ms, _ = host.hook("Stop", payload)
    host.drained()
    entry = [e for e in host.journal() if e.get("session") == "first-use"][-1]
    return {"turns": entry["turns"], "stop_hook_ms": round(ms, 1), "stored_ms": entry["after_ms"]}


def choose(report: dict[str, Any], ceiling: float = 0.15) -> dict[str, Any] | None:
    """The minimum with the most evidence in the block (the mean over the sets) among those
    injecting for at most ``ceiling`` of the unanswered prompts in every set."""
    best = None
    for index, minimum in enumerate(report["minimums"]):
        rows = [s["tradeoff"][index] for s in report["sets"].values()]
        if any((r["injected_unanswered"] or 0) > ceiling for r in rows):
            continue
        evidence = sum(r["evidence_in_block"] or 0 for r in rows) / max(1, len(rows))
        if best is None or evidence > best["evidence_in_block_mean"]:
            per_set = dict(zip(report["sets"], rows, strict=True))
            best = {"minimum": minimum, "evidence_in_block_mean": round(evidence, 4), **per_set}
    return best


def markdown(report: dict[str, Any]) -> str:
    lines = [f"command: {report.get('command', '')}", ""]
    cold = report["cold"]
    lines.append(
        f"prompt hook cold (starts the warm process): {cold['prompt_hook_ms_cold']} ms; "
        f"right after, warm: {cold['prompt_hook_ms_warm_after']} ms"
    )
    cap = report["capture_stored_ms"]
    lines.append(
        f"capture, Stop to stored: p50 {cap['p50']} ms, p95 {cap['p95']} ms (n {cap['n']})"
    )
    first = report["first_use_500_turns"]
    lines.append(
        f"first use, {first['turns']} turns: Stop hook {first['stop_hook_ms']} ms, "
        f"stored after {first['stored_ms']} ms"
    )
    for name, found in report["sets"].items():
        p, s = found["prompt_hook_ms_warm"], found["stop_hook_ms"]
        lines += [
            "",
            f"## {name}: {found['conversations']} conversations, {found['turns']} turns, "
            f"{found['questions']} questions, {found['unanswered_prompts']} unanswered prompts",
            f"prompt hook warm: p50 {p['p50']} ms, p95 {p['p95']} ms (n {p['n']}), of which "
            f"the warm process p50 {found['prompt_worker_ms']['p50']} ms, "
            f"p95 {found['prompt_worker_ms']['p95']} ms; "
            f"Stop hook: p50 {s['p50']} ms, p95 {s['p95']} ms",
            "",
            "| gate | evidence in block | shown | chars/prompt | injected: nothing answers "
            "| other conv. | coding | coding (blind) | BEAM unanswerable |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in found["tradeoff"]:
            lines.append(
                f"| {row['minimum']:.2f} | {row['evidence_in_block']} | {row['shown_per_block']}"
                f" | {row['chars_per_prompt']} | {row['injected_unanswered']}"
                f" | {row.get('injected_other_conversation')} | {row.get('injected_coding')}"
                f" | {row.get('injected_coding_blind', '-')}"
                f" | {row.get('injected_unanswerable', '-')} |"
            )
    if report.get("rules"):
        lines += ["", "rules (floor, share of the top, most shown) by the evidence at the lowest "
                  "gate injecting for <= 0.15 where nothing answers:", "",
                  "| gate | floor | ratio | most | evidence (mean) | "
                  + " | ".join(report["sets"]) + " |",
                  "|---|---|---|---|---|" + "---|" * len(report["sets"])]  # fmt: skip
        for r in report["rules"]:
            per = " | ".join(f"{r[n]['evidence_in_block']} / {r[n]['injected_unanswered']}"
                             for n in report["sets"])  # fmt: skip
            lines.append(f"| {r['gate']:.2f} | {r['floor']} | {r['ratio']} | {r['most']} | "
                         f"{r['evidence_in_block_mean']} | {per} |")  # fmt: skip
    chosen = report.get("chosen")
    lines += ["", f"chosen gate (most evidence with <= 0.15 injected where nothing answers): "
              f"{chosen['minimum'] if chosen else 'none qualifies'}"]  # fmt: skip
    return "\n".join(lines)


def plot(report: dict[str, Any], out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(f"plotting needs matplotlib: {install_hint('bench')}") from exc
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for name, found in report["sets"].items():
        rows = found["tradeoff"]
        xs = [r["minimum"] for r in rows]
        axis.plot(
            xs,
            [r["evidence_in_block"] for r in rows],
            marker="o",
            label=f"{name}: evidence in block",
        )
        axis.plot(xs, [r["injected_unanswered"] for r in rows], linestyle="--",
                  label=f"{name}: injected, nothing answers")  # fmt: skip
    axis.axhline(0.70, color="grey", linewidth=0.6)
    axis.axhline(0.15, color="grey", linewidth=0.6)
    axis.set_xlabel("minimum relevance")
    axis.set_ylabel("share of prompts")
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out, dpi=120)
