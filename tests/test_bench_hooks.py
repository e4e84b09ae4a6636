"""``slm bench hooks`` on small sets in the LoCoMo and generic layouts: the replay runs the
real hook commands, and the report's trade-off is rebuilt from what the hooks injected."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from click.testing import CliRunner

from slm.cli import cli
from slm.hosts.hooks.inject import Rule
from slm_bench.hooks import block_at, chars_at


def _locomo(path: Path) -> Path:
    def turn(speaker: str, number: int, text: str) -> dict[str, str]:
        return {"speaker": speaker, "dia_id": f"D1:{number}", "text": text}

    samples = [
        {
            "sample_id": name,
            "conversation": {
                "speaker_a": "Ana",
                "speaker_b": "Ben",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    turn("Ana", 1, fact),
                    turn("Ben", 2, "That sounds great, tell me more."),
                    turn("Ana", 3, "I will, next week."),
                    turn("Ben", 4, "Looking forward to it."),
                ],
            },
            "qa": [{"question": question, "evidence": ["D1:1"], "category": 4}],
        }
        for name, fact, question in (
            ("c1", "I adopted a grey cat named Pixel last Sunday.", "What is Ana's cat called?"),
            ("c2", "My sister Rosa runs a bakery in Porto.", "Where is Rosa's bakery?"),
        )
    ]
    path.write_text(json.dumps(samples))
    return path


def _beam(path: Path) -> Path:
    memories = [
        {"id": "b:0", "content": "user: Our API gateway is Kong 3.4 behind an nginx proxy.",
         "event_time": "2024-03-15T00:00:00", "source": "user"},
        {"id": "b:1", "content": "assistant: Kong 3.4 behind nginx works; mind the timeouts.",
         "event_time": "2024-03-15T00:00:00", "source": "assistant"},
    ]  # fmt: skip
    questions = [
        {"id": "q1", "question": "Which API gateway do we use?", "evidence_ids": ["b:0"],
         "type": "single", "answerable": True},
        {"id": "q2", "question": "What did the auditors say about the 2019 accounts?",
         "evidence_ids": [], "type": "abstention", "answerable": False},
    ]  # fmt: skip
    instances = [{"id": "b", "memories": memories, "questions": questions}]
    path.write_text(json.dumps({"name": "t", "source": "t", "instances": instances}))
    return path


def test_bench_hooks_replays_through_the_hooks_and_reports_the_tradeoff(tmp_path: Path) -> None:
    coding = tmp_path / "coding.json"
    coding.write_text(json.dumps({"prompts": ["Add a unit test for the CSV parser."]}))
    out = tmp_path / "report.json"
    args = ["bench", "hooks", "--locomo", str(_locomo(tmp_path / "l.json")),
            "--beam", str(_beam(tmp_path / "b.json")), "--coding", str(coding),
            "--out", str(out), "--quiet"]  # fmt: skip
    result = CliRunner().invoke(cli, args)  # the bench stops the warm process it started
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    locomo = report["sets"]["locomo-dev"]
    assert (locomo["conversations"], locomo["turns"], locomo["questions"]) == (2, 8, 2)
    # another conversation's question (2) and the coding prompt (2)
    assert locomo["unanswered_prompts"] == 4
    kinds = {p["kind"] for p in locomo["prompts"]}
    assert kinds == {"question", "other conversation", "coding"}
    at_zero = locomo["tradeoff"][0]
    assert at_zero["minimum"] == 0.0 and at_zero["evidence_in_block"] == 1.0
    assert report["sets"]["beam-dev"]["tradeoff"][0]["evidence_in_block"] == 1.0
    assert report["first_use_500_turns"]["turns"] == 4  # the first conversation's
    assert report["cold"]["prompt_hook_ms_cold"] > 0
    worker, hook = locomo["prompt_worker_ms"], locomo["prompt_hook_ms_warm"]
    assert 0 < worker["p50"] < hook["p50"] and worker["n"] == 6
    assert "| 0.50 |" in result.output and "chosen gate" in result.output
    best = report["rules"][0]  # the rules swept, best first, each at its lowest safe gate
    assert best["locomo-dev"]["evidence_in_block"] == 1.0 and "rules (floor" in result.output
    beam = report["sets"]["beam-dev"]
    assert beam["unanswered_prompts"] == 1  # the coding prompt; its unanswerable one apart
    assert "injected_unanswerable" in beam["tradeoff"][0]


def test_the_block_at_a_gate_is_rebuilt_from_the_candidates() -> None:
    asked = {"abstained": False, "candidates": [["a", 0.9, 100], ["b", 0.4, 2000], ["c", 0.7, 50]]}
    at = Rule(floor=0.3, ratio=0.0)
    assert block_at(asked, replace(at, gate=0.0)) == ["a", "b", "c"]
    assert block_at(asked, replace(at, gate=0.5, floor=0.5)) == ["a", "c"]
    assert block_at(asked, replace(at, gate=0.95)) == []
    assert chars_at(asked, replace(at, gate=0.95)) == 0
    assert 0 < chars_at(asked, replace(at, gate=0.0)) <= 1500
    assert block_at({**asked, "abstained": True}, replace(at, gate=0.0)) == []
