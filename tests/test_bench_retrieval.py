"""``slm bench retrieval``: the generic layout, end to end through the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from slm import Memory, Settings, validate
from slm.channels import ALL_CHANNELS
from slm.cli import cli
from slm_bench.report import AFTER_WRITES, after_writes

BEAM = Path(__file__).resolve().parents[2] / "shared" / "data" / "beam-dev.json"


def dataset(tmp_path: Path) -> Path:
    memories = [
        ("m1", "user: My first sprint ends on March 29.", "user"),
        ("m2", "assistant: Good, let's plan the sprint that ends on March 29.", "assistant"),
        ("m3", "user: Always include version numbers when I ask about libraries.", "user"),
        ("m4", "user: We deploy on Render with three Gunicorn workers.", "user"),
        ("m5", "user: " + "x" * (validate.MAX_CONTENT_BYTES + 1), "user"),
    ]
    questions = [
        ("q1", "When does my first sprint end?", ["m1"], "information_extraction", True),
        ("q2", "Which libraries does the project use?", ["m3"], "instruction_following", True),
        ("q3", "How is the app deployed?", ["m4"], "information_extraction", True),
        ("q4", "Which ESLint rules did I enforce?", [], "abstention", False),
        ("q5", "Which answerable question has no evidence?", [], "broken", True),
    ]
    data = {
        "name": "tiny",
        "source": "written for this test",
        "instances": [
            {
                "id": "one",
                "memories": [
                    {"id": i, "content": c, "event_time": "2024-03-15T00:00:00", "source": s}
                    for i, c, s in memories
                ],
                "questions": [
                    {"id": i, "question": q, "evidence_ids": e, "type": t, "answerable": a}
                    for i, q, e, t, a in questions
                ],
            }
        ],
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def run(args: list[str]) -> Any:
    return CliRunner().invoke(cli, ["bench", "retrieval", *args], catch_exceptions=False)


def test_generic_layout_through_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = run(["--data", str(dataset(tmp_path)), "--out", str(out), "--ablate"])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["name"] == "tiny" and report["instances"] == 1
    assert report["memories"] == 4
    refused = report["refused_memories"]
    assert refused["count"] == 1
    assert list(refused["by_reason"].values()) == [["m5"]]
    assert report["answerable_without_evidence"] == 1
    assert report["scored"] == 3
    assert set(report["by_type"]) == {"information_extraction", "instruction_following"}
    assert report["overall"]["hit@10"] >= 2 / 3  # the harness really retrieves
    assert report["overall"]["fewer_than_10"] == 3  # four memories in the store
    assert report["abstention"]["negatives"] == 1
    assert 0.0 <= report["abstention"]["auroc"] <= 1.0
    assert set(report["latency_ms"]) == {"p50", "p95", "embed_p50", "embed_p95", "steps_p50"}
    assert report["latency_ms"]["embed_p50"] > 0
    assert report["latency_ms"]["steps_p50"]["embedding wait"] > 0
    assert len(report["ablation"]) == len(ALL_CHANNELS)
    assert report["command"].startswith("slm bench retrieval --data")
    assert "| overall | 3 |" in result.output
    assert "refused by the engine (not stored): 1" in result.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "cannot read"),
        ('{"name": "x"}', "'instances' is missing"),
        ('{"instances": [{"id": "a", "questions": []}]}', "'memories' is missing"),
        ('{"instances": {"id": "a"}}', "'instances' must be a list"),
        (
            '{"instances": [{"id": "a", "memories": [{"id": "m", "content": "x", '
            '"event_time": "yesterday"}], "questions": []}]}',
            "event_time is not an ISO 8601 timestamp",
        ),
    ],
)
def test_a_file_not_in_the_layout_is_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    result = CliRunner().invoke(cli, ["bench", "retrieval", "--data", str(path)])
    assert result.exit_code == 1
    assert message in result.output


@pytest.mark.skipif(not BEAM.exists(), reason="BEAM dev data is not available")
def test_beam_slice(tmp_path: Path) -> None:
    out = tmp_path / "beam.json"
    result = run(["--data", str(BEAM), "--instances", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["instances"] == 1 and report["scored"] == 18
    assert report["abstention"]["negatives"] == 2
    assert report["overall"]["hit@10"] > 0.5  # the harness really retrieves


def test_progress_on_stderr_unless_quiet(tmp_path: Path) -> None:
    data = dataset(tmp_path)
    shown = run(["--data", str(data), "--json"])
    assert shown.exit_code == 0 and "one: 4 memories, 5 questions" in shown.stderr
    assert json.loads(shown.stdout)["scored"] == 3  # stdout stays the report alone
    quiet = run(["--data", str(data), "--quiet"])
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_after_writes_stores_one_memory_before_each_timed_recall(tmp_path: Path) -> None:
    too_long = "x" * (validate.MAX_CONTENT_BYTES + 1)
    items = [{"content": too_long}] + [{"content": f"note {i} about the boiler"} for i in range(3)]
    now = datetime(2024, 3, 15, tzinfo=UTC)
    with Memory(tmp_path / "m.db", settings=Settings(embedder="fake")) as memory:
        times = after_writes(memory, ["boiler?", "which note?"], items, now)
        assert len(times) == 2 and all(ms > 0 for ms in times)
        assert memory.count() == 2  # the refused item passed over, one per question
        many = [f"question {i}?" for i in range(AFTER_WRITES + 5)]
        notes = [{"content": f"entry {i}"} for i in range(AFTER_WRITES + 5)]
        assert len(after_writes(memory, many, notes, now)) == AFTER_WRITES
        assert memory.count() == 2 + AFTER_WRITES
