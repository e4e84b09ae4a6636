"""Ingest-side derived data (entities, dates, edges), reindex, forget, health and trace."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner
from postgres_server import rows as sql

from slm import ChannelUnavailable, Memory, Settings
from slm.cli import cli
from slm.models import to_micros
from slm.validate import timestamp


def execute(memory: Memory, statement: str) -> list[tuple[Any, ...]]:
    """Run SQL directly on the memory's store (either kind: the table names are the same)."""
    return sql(memory.store.location, memory.store.kind, statement)


def derived_rows(memory: Memory) -> dict[str, Any]:
    def rows(statement: str) -> list[tuple[Any, ...]]:
        return sorted(execute(memory, statement))

    return {
        "entities": rows("SELECT name, kind, mentions FROM entities"),
        "mentions": rows(
            "SELECT e.name, m.key, m.speaker FROM mentions m JOIN entities e ON e.id = m.entity"
        ),
        "times": rows("SELECT key, start_us, end_us FROM memory_times"),
        "edges": [
            (src, dst, kind, round(weight, 4))
            for src, dst, kind, weight in rows("SELECT src, dst, kind, weight FROM edges")
        ],
        "postings": rows("SELECT term, key, tf, dl FROM lex_postings"),
        "terms": rows("SELECT term, df FROM lex_terms"),
        "stats": rows("SELECT n_docs, total_len FROM lex_stats"),
    }


def test_entities_and_aliases_are_stored(memory: Memory) -> None:
    a = memory.remember("Caroline: I met John Smith at the Golden Gate Park")
    b = memory.remember("Melanie: John's new job sounds great")
    store = memory.store
    found = store.find_entities(memory.profile, ["john", "caroline", "golden gate park"])
    assert {name for _, name, _ in found["john"]} == {"john", "john smith"}
    assert [count for _, _, count in found["caroline"]] == [1]
    mentioned = store.memory_entities(memory.profile, [a.key, b.key])
    assert {name for _, name, _, _ in mentioned[a.key]} >= {"caroline", "john smith"}
    assert {name for _, name, _, _ in mentioned[b.key]} >= {"melanie", "john"}
    # the speaker flag marks who says it
    assert {name for _, name, _, speaker in mentioned[a.key] if speaker} == {"caroline"}
    assert {name for _, name, _, speaker in mentioned[b.key] if speaker} == {"melanie"}
    ids = {name: entity for entity, name, _, _ in mentioned[a.key] + mentioned[b.key]}
    assert store.speakers(memory.profile, list(ids.values())) == {ids["caroline"], ids["melanie"]}
    assert store.speakers("someone-else", list(ids.values())) == set()


def test_referenced_dates_resolve_against_event_time(memory: Memory) -> None:
    m = memory.remember("I went to a support group yesterday", event_time="2023-05-08T13:56:00Z")
    spans = memory.store.referenced_times(memory.profile, [m.key])[m.key]
    start, end = timestamp("2023-05-07"), timestamp("2023-05-08")
    assert start is not None and end is not None
    assert spans == ((to_micros(start), to_micros(end)),)


def test_session_turns_are_linked(memory: Memory) -> None:
    turns = memory.remember_many(
        [
            {"content": f"turn {i} of the talk", "metadata": {"conversation": "x", "session": 1}}
            for i in range(3)
        ]
        + [{"content": "another session", "metadata": {"conversation": "x", "session": 2}}]
    )
    edges = memory.indexes.edges.edges_from(memory.profile, [t.key for t in turns])
    assert (turns[1].key, "next", 1.0) in edges[turns[0].key]
    assert (turns[0].key, "prev", 1.0) in edges[turns[1].key]
    assert all(dst != turns[3].key for dst, kind, _ in edges[turns[2].key] if kind != "similar")


def test_same_source_close_in_time_is_a_session(memory: Memory) -> None:
    a = memory.remember("first thought", source="agent-1", event_time="2024-01-01T10:00:00Z")
    b = memory.remember("second thought", source="agent-1", event_time="2024-01-01T10:05:00Z")
    c = memory.remember("much later", source="agent-1", event_time="2024-01-02T10:00:00Z")
    edges = memory.indexes.edges.edges_from(memory.profile, [a.key, b.key, c.key])
    assert (b.key, "next", 1.0) in edges[a.key]
    assert c.key not in {dst for dst, _, _ in edges.get(b.key, [])}


def test_strong_semantic_neighbours_are_linked(memory: Memory) -> None:
    a = memory.remember("kayak paddle river rapids")
    b = memory.remember("kayak paddle river rapids weekend")
    edges = memory.indexes.edges.edges_from(memory.profile, [a.key])
    assert any(dst == b.key and kind == "similar" for dst, kind, _ in edges[a.key])


def test_forget_removes_all_derived_data_and_closes_the_gap(memory: Memory) -> None:
    session = {"session": "s"}
    first = memory.remember("Ann: hello Bob, meet me in Paris yesterday", metadata=session)
    middle = memory.remember("Bob: Paris sounds lovely, Ann", metadata=session)
    last = memory.remember("Ann: see you there", metadata=session)
    memory.forget([middle.id])
    rows = derived_rows(memory)
    assert all(middle.key not in (src, dst) for src, dst, _, _ in rows["edges"])
    assert all(key != middle.key for _, key, _ in rows["mentions"])
    assert (first.key, last.key, "next", 1.0) in rows["edges"]
    memory.forget([first.id, last.id])
    rows = derived_rows(memory)
    assert rows["entities"] == rows["mentions"] == rows["times"] == rows["edges"] == []
    assert rows["postings"] == rows["terms"] == []
    assert rows["stats"] == [(0, 0)]


def test_reindex_rebuilds_the_same_derived_data(memory: Memory) -> None:
    memory.remember_many(
        [
            {
                "content": f"Caroline: went to Boston on May {i + 1}, {['Ann', 'Bo'][i % 2]} came",
                "event_time": "2023-05-20",
                "metadata": {"session": i // 2},
            }
            for i in range(6)
        ]
    )
    before = derived_rows(memory)
    for table in (
        "mentions",
        "memory_times",
        "edges",
        "lex_postings",
        "lex_terms",
        "lex_docs",
        "entities",
    ):
        execute(memory, f"DELETE FROM {table}")
    execute(memory, "UPDATE lex_stats SET n_docs = 0, total_len = 0")
    assert memory.reindex() == 6
    assert derived_rows(memory) == before


def test_required_channels_fail_loudly(
    store_at: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(**store_at, settings=Settings(embedder="fake")) as memory:
        memory.remember("one memory")
        execute(memory, "DELETE FROM lex_docs")
    with pytest.raises(ChannelUnavailable, match=r"bm25.*missing from its index"):
        Memory(**store_at, settings=Settings(embedder="fake", required_channels=("bm25",)))
    monkeypatch.setenv("SLM_EMBEDDER", "fake")
    monkeypatch.setenv("SLM_REQUIRED_CHANNELS", "semantic,bm25")
    with pytest.raises(ChannelUnavailable):
        Memory(**store_at)
    monkeypatch.setenv("SLM_REQUIRED_CHANNELS", "semantic,temporal,hopfield,spreading")
    with Memory(**store_at) as memory:
        report = memory.health()["channels"]
    assert report["bm25"]["healthy"] is False
    assert all(report[n]["healthy"] for n in ("semantic", "temporal", "hopfield", "spreading"))
    with pytest.raises(ChannelUnavailable, match="disabled"):
        Memory(
            **store_at,
            settings=Settings(embedder="fake", channels=("semantic",), required_channels=("bm25",)),
        )


def test_a_failing_channel_is_reported_not_dropped(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory.remember("a memory about kites")

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("index exploded")

    monkeypatch.setattr(memory.channels["temporal"], "candidates", broken)
    response = memory.recall("kites", trace=True)
    assert response.results  # the other channels still answer
    assert response.trace is not None
    run = response.trace["channels"]["temporal"]
    assert run["ran"] is False and run["error"] == "RuntimeError: index exploded"
    state = memory.health()["channels"]["temporal"]
    assert state["healthy"] is False and "index exploded" in state["reason"]
    monkeypatch.undo()
    memory.recall("kites")
    assert memory.health()["channels"]["temporal"]["healthy"] is True


def test_cli_trace_reindex_health(
    store_at: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLM_EMBEDDER", "fake")
    for name, value in store_at.items():
        monkeypatch.setenv({"path": "SLM_DB", "dsn": "SLM_DSN"}[name], str(value))
    runner = CliRunner()
    runner.invoke(cli, ["remember", "Ann: flew to Oslo in July 2024", "--event-time", "2024-07-03"])
    out = runner.invoke(cli, ["trace", "What did Ann do in July 2024?"]).output
    assert "temporal" in out and "window   2024-07-01 .. 2024-08-01" in out
    assert "entities ann" in out
    reindexed = runner.invoke(cli, ["reindex", "--json"])
    assert reindexed.exit_code == 0 and '"reindexed": 1' in reindexed.output
    health = runner.invoke(cli, ["health", "--json"]).output
    assert all(
        f'"{name}"' in health for name in ("semantic", "bm25", "temporal", "hopfield", "spreading")
    )
    recalled = runner.invoke(
        cli, ["recall", "Ann Oslo", "--channels", "bm25,spreading", "--json", "--trace"]
    )
    assert '"hopfield": {\n        "ran": false' in recalled.output


def test_forget_works_on_a_store_with_a_stale_index(memory: Memory) -> None:
    record = memory.remember("a memory whose lexical rows went missing")
    execute(memory, "DELETE FROM lex_docs")
    assert memory.forget([record.id]) == [record.id]
    assert memory.count() == 0


def test_only_speakers_found_everywhere_are_left_out_of_the_query_embedding(
    memory: Memory,
) -> None:
    """Amy speaks in every memory (her name tells the memories apart no better than "the");
    Zed speaks in one of 21 and Bob never speaks: their names stay in the embedded text."""
    memory.remember_many(
        [{"content": f"Amy: note number {i} about the garden, Bob"} for i in range(20)]
        + [{"content": "Zed: the shed roof leaks"}]
    )

    def embedded(question: str) -> str:
        trace = memory.recall(question, trace=True).trace
        assert trace is not None
        return str(trace["query"]["embedded_text"])

    assert embedded("What did Amy say about the garden?") == "What did say about the garden?"
    assert embedded("What did Zed say about the roof?") == "What did Zed say about the roof?"
    assert embedded("What did Amy tell Bob?") == "What did tell Bob?"


def test_a_crowded_time_window_is_reported_not_read(memory: Memory) -> None:
    memory.remember_many(
        [
            {"content": f"garden note {i}", "event_time": f"2024-01-{i + 1:02d}T10:00:00Z"}
            for i in range(12)
        ]
    )
    store, profile = memory.store, memory.profile
    start, end = timestamp("2024-01-01"), timestamp("2024-02-01")
    assert start is not None and end is not None
    window = (to_micros(start), to_micros(end))
    found = store.time_overlaps(profile, *window, 12)
    assert found is not None and len(found) == 12
    assert store.time_overlaps(profile, *window, 11) is None
    # a referenced date in the window counts as much as an event time
    memory.remember("We booked the dinner for January 20, 2024", event_time="2023-12-01T10:00:00Z")
    assert store.time_overlaps(profile, *window, 12) is None
    found = store.time_overlaps(profile, *window, 13)
    assert found is not None and len(found) == 13
