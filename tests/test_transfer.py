"""JSON Lines import and export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slm import InvalidInput, Memory, Settings
from slm.transfer import export_jsonl, import_jsonl


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_export_import_round_trip(memory: Memory, tmp_path: Path) -> None:
    memory.remember(
        "alpha",
        event_time="2023-05-08T13:56:00Z",
        source="s1",
        confidence=0.3,
        metadata={"dia_id": "D1:3"},
        tags=["a", "b"],
    )
    memory.remember("beta")
    out = tmp_path / "dump.jsonl"
    with open(out, "w", encoding="utf-8") as handle:
        assert export_jsonl(memory, handle) == 2
    with Memory(tmp_path / "copy.db", settings=Settings(embedder="fake")) as copy:
        report = import_jsonl(copy, out)
        assert (report.read, report.stored, report.existing) == (2, 2, 0)
        original = {r.id: r.to_dict() for r in memory.list()}
        copied = {r.id: r.to_dict() for r in copy.list()}
    assert copied == original


def test_reimport_stores_nothing_twice(memory: Memory, tmp_path: Path) -> None:
    rows = [{"content": f"fact {i}"} for i in range(600)]
    full = write_jsonl(tmp_path / "full.jsonl", rows)
    half = write_jsonl(tmp_path / "half.jsonl", rows[:300])
    import_jsonl(memory, half)  # as if the first run had died half way
    report = import_jsonl(memory, full)
    assert (report.read, report.stored, report.existing) == (600, 300, 300)
    assert memory.count() == 600


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 2: not valid JSON"),
        ("[1, 2]", "line 2: expected a JSON object"),
        ('{"content": ""}', "line 2: content is empty"),
        ('{"text": "wrong field"}', "line 2: unknown field"),
        ('{"content": "ok", "event_time": "yesterday"}', "line 2: event_time"),
    ],
)
def test_bad_line_stores_nothing(memory: Memory, tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"content": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match=message):
        import_jsonl(memory, path)
    assert memory.count() == 0


def test_missing_and_binary_files(memory: Memory, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read"):
        import_jsonl(memory, tmp_path / "absent.jsonl")
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InvalidInput, match="not UTF-8"):
        import_jsonl(memory, binary)
