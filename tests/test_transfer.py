"""JSON Lines import and export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slm import InvalidInput, Memory, Settings
from slm.copy.jsonl import export_jsonl, import_jsonl


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


CHAT = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        # a pretty-printed export with a trailing comma: the bracket after it is unexpected
        (
            json.dumps(CHAT, indent=2).replace('"hello"\n    }', '"hello"\n    },'),
            "not valid JSON at line 11, column 3: Expecting value",
        ),
        (json.dumps([{"content": "a"}, {"content": "b"}], indent=1), "one JSON document, not"),
        (
            json.dumps({"messages": [{"role": "user", "content": 7}]}, indent=1),
            "^the conversation: ",
        ),
        (json.dumps([CHAT, {"messages": [{"content": "x"}]}], indent=1), "^conversation 2: "),
    ],
)
def test_a_json_document_is_refused_with_a_place_in_it(
    memory: Memory, tmp_path: Path, document: str, message: str
) -> None:
    """A file that is one JSON document (a chat export) is not JSON Lines: a problem in it is
    placed as in a document (the line and column of the JSON error, the conversation), never
    as "line 1" of JSON Lines."""
    path = tmp_path / "bad.json"
    path.write_text(document, encoding="utf-8")
    with pytest.raises(InvalidInput, match=message) as refused:
        import_jsonl(memory, path)
    assert not str(refused.value).startswith("line 1")
    assert memory.count() == 0


def test_missing_and_binary_files(memory: Memory, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read"):
        import_jsonl(memory, tmp_path / "absent.jsonl")
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InvalidInput, match="not UTF-8"):
        import_jsonl(memory, binary)


# -- lossless round trips (issue #30) -----------------------------------------------------------

LONG = "The garden plan. " + " ".join(
    f"Bed {i} holds tomatoes, basil and marigolds." for i in range(80)
)


def seeded(memory: Memory) -> None:
    """A profile with an explicit update, a text long enough for passages, and feedback
    given on a recall."""
    old = memory.remember("Priya lives in Lisbon", event_time="2023-01-01")
    memory.update(old.id, "Priya moved to Porto", event_time="2024-06-01")
    memory.remember_many(
        [
            {"content": LONG, "source": "notes", "tags": ["garden"]},
            {"content": "Deploys happen on Thursdays", "metadata": {"team": 3}},
        ]
    )
    for question, useful in (("Where does Priya live?", True), ("When are deploys?", False)):
        response = memory.recall(question, k=3)
        memory.feedback(response.results[0].id, useful=useful, query_id=response.query_id)
    memory.learning.flush()


def exported(memory: Memory, path: Path) -> list[dict[str, object]]:
    with open(path, "w", encoding="utf-8") as handle:
        export_jsonl(memory, handle)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def renamed(lines: list[dict[str, object]], ids: dict[str, str]) -> list[dict[str, object]]:
    """``lines`` with every memory id replaced through ``ids``."""
    text = json.dumps(lines)
    for old, new in ids.items():
        text = text.replace(old, new)
    return list(json.loads(text))


@pytest.mark.parametrize("store_kind", ["same store, other profile", "new store"])
def test_export_then_import_keeps_links_and_feedback(
    memory: Memory, tmp_path: Path, store_kind: str
) -> None:
    seeded(memory)
    first = exported(memory, tmp_path / "first.jsonl")
    assert sum("feedback" in line for line in first) == 2
    assert any(line.get("superseded_by") for line in first)
    where: dict[str, object] = {"path": tmp_path / "other.db"}
    if store_kind != "new store":
        sqlite = memory.store.kind == "sqlite"
        where = {"path": Path(memory.store.location)} if sqlite else {"dsn": memory.store.location}
    with Memory(**where, profile="copy", settings=Settings(embedder="fake")) as target:  # type: ignore[arg-type]
        report = import_jsonl(target, tmp_path / "first.jsonl")
        assert (report.read, report.stored, report.existing) == (4, 4, 0)
        assert report.feedback == 2 and report.feedback_skipped == 0
        assert report.renamed == (4 if store_kind != "new store" else 0)
        second = exported(target, tmp_path / "second.jsonl")
        # The same memories in the same order: map the first export's ids onto the second's.
        ids = {
            str(a["id"]): str(b["id"])
            for a, b in zip(first, second, strict=True)
            if "id" in a and "id" in b
        }
        assert renamed(first, ids) == second
        # Every link points inside the imported profile.
        for line in second:
            if line.get("superseded_by"):
                assert target.get(str(line["superseded_by"])).content == "Priya moved to Porto"
        again = import_jsonl(target, tmp_path / "first.jsonl")
        assert (again.stored, again.existing, again.renamed) == (0, 4, 0)
        assert (again.feedback, again.feedback_skipped) == (0, 2)
        assert exported(target, tmp_path / "third.jsonl") == second
    # The source profile is untouched.
    assert exported(memory, tmp_path / "source-again.jsonl") == first


def test_a_link_to_nothing_is_refused_before_anything_is_stored(
    memory: Memory, tmp_path: Path
) -> None:
    path = tmp_path / "dangling.jsonl"
    path.write_text(
        '{"content": "kept?", "id": "00000000000000aa"}\n'
        '{"content": "Ana lived in Porto", "event_time": "2023-01-01", "valid_to": "2024-01-01",'
        ' "superseded_by": "00000000000000ff"}\n',
        encoding="utf-8",
    )
    with pytest.raises(InvalidInput, match="line 2: superseded_by 00000000000000ff names no"):
        import_jsonl(memory, path)
    assert memory.count() == 0
