"""The benchmark harness: metrics by hand, evidence cleaning, and a small real LoCoMo slice."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from slm.channels import ALL_CHANNELS
from slm.cli import cli
from slm.errors import InvalidInput
from slm_bench.locomo import Cleaning, clean_evidence, parse_locomo_datetime
from slm_bench.metrics import auroc, hit_at, mcnemar_p, percentile, recall_at, reciprocal_rank

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev.json"


def test_ranking_metrics_by_hand() -> None:
    ranked = ["a", "b", "c", "d"]
    assert hit_at(ranked, {"c"}, 2) == 0.0 and hit_at(ranked, {"c"}, 3) == 1.0
    assert recall_at(ranked, {"a", "d", "z"}, 4) == pytest.approx(2 / 3)
    assert reciprocal_rank(ranked, {"c", "d"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, {"z"}) == 0.0


def test_percentile_and_auroc_by_hand() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5.0], 95) == 5.0
    assert math.isnan(percentile([], 50))
    assert auroc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert auroc([0.1], [0.9]) == 0.0
    assert auroc([0.5, 0.5], [0.5]) == 0.5
    assert auroc([0.9, 0.3], [0.5, 0.1]) == pytest.approx(0.75)


def test_mcnemar_by_hand() -> None:
    assert mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(3, 3) == 1.0
    # 0 of 5 discordant pairs one way: 2 * (1/2)^5.
    assert mcnemar_p(0, 5) == pytest.approx(2 / 32)
    # 1 of 7: 2 * (C(7,0) + C(7,1)) / 2^7.
    assert mcnemar_p(6, 1) == pytest.approx(16 / 128)


def test_evidence_cleaning() -> None:
    cleaning = Cleaning()
    ids = clean_evidence(["D30:05", "D1:3; D1:4", "D2:1 D2:2", "D", "D:11:26"], cleaning)
    assert ids == {"D30:5", "D1:3", "D1:4", "D2:1", "D2:2"}
    assert cleaning.evidence_ids_dropped == 2


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo dev data is not available")
def test_locomo_slice_through_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        cli,
        [
            "bench",
            "locomo",
            "--data",
            str(LOCOMO),
            "--conversations",
            "2",
            "--questions",
            "12",
            "--out",
            str(out),
            "--ablate",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["conversations"] == 2 and report["scored"] > 0
    assert set(report["overall"]) >= {"hit@1", "hit@5", "hit@10", "recall@10", "mrr@10"}
    assert set(report["by_category"]) == {"1", "2", "3", "4"}
    assert set(report["latency_ms"]) == {
        "p50",
        "p95",
        "embed_p50",
        "embed_p95",
        "after_write_p50",
        "after_write_p95",
        "steps_p50",
    }
    assert report["latency_ms"]["embed_p50"] > 0
    assert report["latency_ms"]["after_write_p50"] > 0
    assert "right after storing a memory" in result.output
    steps = report["latency_ms"]["steps_p50"]
    assert list(steps)[:4] == ["interpret", "while embedding", "embedding wait", "channels"]
    assert steps["embedding wait"] > 0 and "where a recall goes" in result.output
    assert report["ingest_ms_per_memory"] > 0
    assert set(report["abstention"]) >= {"auroc", "negatives_abstained", "positives_abstained"}
    assert len(report["ablation"]) == len(ALL_CHANNELS)
    for block in report["ablation"].values():
        pair = block["paired_hit@10"]
        change = (block["overall"]["hit@10"] - report["overall"]["hit@10"]) * report["scored"]
        assert round(change) == pair["gained"] - pair["lost"]
        assert 0 <= pair["p"] <= 1
    assert report["overall"]["hit@10"] > 0.3  # the harness really retrieves
    assert "| overall |" in result.output


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
        ("12:09 am on 1 January, 2024", datetime(2024, 1, 1, 0, 9, tzinfo=UTC)),
        ("12:30 pm on 13 October, 2023", datetime(2023, 10, 13, 12, 30, tzinfo=UTC)),
        ("  7:55 PM on 9 June 2023 ", datetime(2023, 6, 9, 19, 55, tzinfo=UTC)),
    ],
)
def test_parse_locomo_datetime(text: str, expected: datetime) -> None:
    assert parse_locomo_datetime(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2023-05-08",
        "yesterday",
        "13:56 pm on 8 May, 2023",
        "1:61 pm on 8 May, 2023",
        "1:56 pm on 31 February, 2023",
        "1:56 pm on 8 Mai, 2023",
        "",
    ],
)
def test_parse_locomo_datetime_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_locomo_datetime(text)


def test_lifecycle_histories_are_deterministic_and_varied() -> None:
    from slm_bench.histories import generate

    first, again, other = generate(3, 6), generate(3, 6), generate(4, 6)
    assert first == again and first != other
    for history in first:
        assert 20 <= len(history.notes) <= 200
        versions: dict[tuple[str, str], int] = {}
        for note in history.notes:
            if note.fact is not None:
                person, attribute, version = note.fact
                versions[(person, attribute)] = max(versions.get((person, attribute), 0), version)
        assert versions and all(0 <= last <= 4 for last in versions.values())
        assert any(note.fact is None for note in history.notes)  # distractors
        assert set(history.replaces) <= {note.label for note in history.notes}
    kinds = {question.kind for history in first for question in history.questions}
    assert kinds == {"current", "as_of", "past", "when"}


def test_lifecycle_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLM_EMBEDDER", "fake")
    out = tmp_path / "lifecycle.json"
    result = CliRunner().invoke(
        cli, ["bench", "lifecycle", "--histories", "2", "--out", str(out)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert set(report["modes"]) == {"explicit", "suggest", "auto"}
    explicit = report["modes"]["explicit"]
    assert explicit["stale_first"] == 0.0  # superseded memories are left out
    assert explicit["current_hit@1"] > 0.3  # even the fake embedder finds current values
    links = report["links"]
    assert links["links"] > 0 and links["true_links"] <= links["links"]
    assert 0 <= links["changes_linked"] <= 1
    assert report["latency_ms"]["p50"] > 0
    assert "| explicit |" in result.output


def _history_set() -> dict[str, object]:
    """Two small histories in the layout of BENCHMARK.md section 4 (written for this test)."""
    return {
        "histories": [
            {
                "id": "a",
                "attribute": "Ravi's car",
                "memories": [
                    {
                        "id": "a1",
                        "role": "fact",
                        "event_time": "2023-01-05T10:00:00Z",
                        "content": "Ravi drives a battered old Toyota pickup.",
                    },
                    {
                        "id": "a2",
                        "role": "distractor",
                        "event_time": "2023-04-05T10:00:00Z",
                        "content": "Ravi's brother rented a van for the move.",
                    },
                    {
                        "id": "a3",
                        "role": "fact",
                        "event_time": "2024-02-05T10:00:00Z",
                        "content": "Ravi finally sold the pickup and now drives an electric Kia.",
                    },
                ],
                "changes": [["a1", "a3"]],
                "questions": [
                    {
                        "id": "aq1",
                        "kind": "current",
                        "question": "What does Ravi drive?",
                        "expected": "a3",
                        "superseded": ["a1"],
                    },
                    {
                        "id": "aq2",
                        "kind": "past",
                        "question": "What does Ravi drive?",
                        "as_of": "2023-06-01T00:00:00Z",
                        "expected": "a1",
                    },
                ],
            },
            {
                "id": "b",
                "attribute": "user standup time",
                "memories": [
                    {
                        "id": "b1",
                        "role": "fact",
                        "event_time": "2023-02-01T08:00:00Z",
                        "content": "Our standup is every day at 9:30.",
                    },
                    {
                        "id": "b2",
                        "role": "fact",
                        "event_time": "2023-09-01T08:00:00Z",
                        "content": "With the Berlin folks joining, standup moved to 8:45.",
                    },
                ],
                "changes": [["b1", "b2"]],
                "questions": [
                    {
                        "id": "bq1",
                        "kind": "current",
                        "question": "When is standup?",
                        "expected": "b2",
                        "superseded": ["b1"],
                    },
                ],
            },
        ],
        "unanswerable": [
            {"id": "u1", "question": "Which dealer sold Ravi the Kia?", "history": "a"}
        ],
    }


def test_a_history_set_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLM_EMBEDDER", "fake")
    data, out = tmp_path / "histories.json", tmp_path / "report.json"
    data.write_text(json.dumps(_history_set()), encoding="utf-8")
    result = CliRunner().invoke(
        cli, ["bench", "lifecycle", "--data", str(data), "--out", str(out)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["questions"] == {"current": 2, "past": 1, "unanswerable": 1}
    assert report["memories"] == 5 and report["histories"] == 2
    assert report["links"]["changes"] == 2
    assert (
        report["links"]["gold_linked"] + report["links"]["false_links"] == report["links"]["found"]
    )
    for name in ("current@1", "stale_first", "past_hit@10", "current_hit@10"):
        assert 0.0 <= report[name] <= 1.0
    assert report["command"].startswith("slm bench lifecycle --data")
    assert "current@1" in result.output


def test_a_history_set_with_an_unknown_reference_is_refused(tmp_path: Path) -> None:
    from slm_bench.history_set import load

    broken = _history_set()
    broken["histories"][0]["changes"] = [["a1", "a9"]]  # type: ignore[index]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(InvalidInput, match="a9"):
        load(path)
    result = CliRunner().invoke(cli, ["bench", "lifecycle", "--data", str(path)])
    assert result.exit_code == 1 and "a9" in result.output
    path.write_text('{"histories": [{"id": "x"}]}', encoding="utf-8")
    with pytest.raises(InvalidInput, match="not a history set"):
        load(path)
