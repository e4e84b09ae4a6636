"""Metadata filters on recall and list (issue #31), on both stores: equality and membership
on metadata keys, combined with the other filters, applied before ranking."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from slm import InvalidInput, Memory
from slm.cli import cli

ROWS = [
    {
        "content": f"garden note {i} about tomatoes and basil",
        "source": "notes" if i % 2 else "chat",
        "metadata": {"user_id": f"u{i % 4}", "session": i % 5, "pinned": i % 3 == 0,
                     "team": None if i % 7 == 0 else "ops", "label": "7" if i == 7 else "x"},
    }
    for i in range(40)
]  # fmt: skip


def matching(rule: dict[str, Any]) -> set[str]:
    def holds(meta: dict[str, Any]) -> bool:
        for key, allowed in rule.items():
            values = allowed if isinstance(allowed, list) else [allowed]
            if key not in meta or not any(
                meta[key] == v and type(meta[key]) is type(v) for v in values
            ):
                return False
        return True

    return {str(r["content"]) for r in ROWS if holds(r["metadata"])}  # type: ignore[arg-type]


RULES: list[dict[str, Any]] = [
    {"user_id": "u1"},
    {"user_id": ["u1", "u2"]},
    {"user_id": "u3", "session": [0, 3]},
    {"pinned": True},
    {"team": None},
    {"label": "7"},  # the text "7", not the number
    {"session": 2, "pinned": False},
    {"user_id": "nobody"},
]


@pytest.mark.parametrize("rule", RULES, ids=[json.dumps(r) for r in RULES])
def test_list_and_recall_keep_exactly_what_matches(memory: Memory, rule: dict[str, Any]) -> None:
    memory.remember_many(ROWS)
    wanted = matching(rule)
    listed = {r.content for r in memory.list(1000, metadata=rule)}
    assert listed == wanted
    recalled = memory.recall("tomatoes and basil in the garden", k=1000, metadata=rule)
    assert {r.memory.content for r in recalled.results} <= wanted
    # Applied before ranking: k results come back whenever k memories match.
    top = memory.recall("tomatoes and basil in the garden", k=3, metadata=rule)
    assert len(top.results) == min(3, len(wanted))


def test_metadata_combines_with_the_other_filters(memory: Memory) -> None:
    memory.remember_many(ROWS)
    rule = {"user_id": ["u0", "u1"]}
    listed = memory.list(1000, source="notes", metadata=rule)
    assert listed and all(r.source == "notes" and r.metadata["user_id"] in ("u0", "u1")
                          for r in listed)  # fmt: skip
    recalled = memory.recall("garden tomatoes", k=50, source="chat", metadata=rule)
    assert all(r.memory.source == "chat" for r in recalled.results)


@pytest.mark.parametrize(
    "rule",
    [["user_id"], {"user_id": {"nested": 1}}, {"user_id": []}, {"": 1}, "{not json",
     {f"k{i}": 1 for i in range(17)}, {"x": float("nan")}],
)  # fmt: skip
def test_a_bad_filter_is_refused_naming_it(memory: Memory, rule: Any) -> None:
    with pytest.raises(InvalidInput) as refused:
        memory.list(10, metadata=rule)
    assert refused.value.field == "metadata"
    with pytest.raises(InvalidInput):
        memory.recall("garden", metadata=rule)


def test_where_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLM_EMBEDDER", "fake")
    monkeypatch.setenv("SLM_DB", str(tmp_path / "cli.db"))
    with Memory(tmp_path / "cli.db") as memory:
        memory.remember_many(ROWS)
    run = CliRunner()
    listed = run.invoke(cli, ["list", "--limit", "100", "--json", "--where", "user_id=u1",
                              "--where", "user_id=u2", "--where", "session=3"])  # fmt: skip
    assert listed.exit_code == 0, listed.output
    got = {m["content"] for m in json.loads(listed.stdout)["memories"]}
    assert got == matching({"user_id": ["u1", "u2"], "session": 3})
    recalled = run.invoke(cli, ["recall", "tomatoes", "--json", "--where", "pinned=true"])
    results = json.loads(recalled.stdout)["results"]
    assert results and all(r["metadata"]["pinned"] is True for r in results)
    bad = run.invoke(cli, ["list", "--where", "user_id"])
    assert bad.exit_code == 1 and "KEY=VALUE" in bad.output


def test_a_store_from_before_the_index_is_indexed_when_opened(
    store_at: dict[str, Any], tmp_path: Path
) -> None:
    """A store written by 0.5.0 (no metadata index) gets it filled by the migration."""
    from postgres_server import rows as run_sql

    from slm import Settings

    with Memory(**store_at, settings=Settings(embedder="fake")) as memory:
        memory.remember_many(ROWS)
        kind, where = memory.store.kind, memory.store.location
    at = where if kind == "sqlite" else store_at["dsn"]
    # 0.5.0's schema: neither the metadata index nor scopes (tests/test_scopes.py)
    for statement in (
        "DROP INDEX memories_scope",
        "ALTER TABLE memories DROP COLUMN scope",
        "DROP TABLE memory_fields",
        "DROP TABLE changes",  # the change feed, after the metadata index
        "DROP TABLE unfinished",  # the marks of writes in parts, after the feed
    ):
        run_sql(at, kind, statement)
    if kind == "sqlite":
        run_sql(where, kind, "PRAGMA user_version = 10")
    else:
        run_sql(at, kind, "DELETE FROM slm_schema WHERE version >= 10")
    with Memory(**store_at, settings=Settings(embedder="fake")) as memory:
        listed = {r.content for r in memory.list(1000, metadata={"user_id": "u2"})}
        assert listed == matching({"user_id": "u2"})


def test_any_key_and_text_value_can_be_filtered_on(memory: Memory) -> None:
    odd = ["a\x00b", 'q"uote', "über", "$.x", "with space", "ключ"]
    memory.remember_many(
        [
            {"content": f"odd key note {i}", "metadata": {key: f"v\x00{i}"}}
            for i, key in enumerate(odd)
        ]
    )
    for i, key in enumerate(odd):
        found = memory.list(10, metadata={key: f"v\x00{i}"})
        assert [r.content for r in found] == [f"odd key note {i}"], key


def test_a_repeated_filter_sees_every_write_at_once(
    memory: Memory, store_at: dict[str, Any]
) -> None:
    """The keys of a metadata filter are kept between recalls; a memory stored or forgotten,
    here or by another process's Memory on the same store, shows at the next call."""
    from slm import Settings

    rule = {"user_id": "u7"}
    first = memory.remember("u7 likes green tea", metadata={"user_id": "u7"})
    assert [r.content for r in memory.list(10, metadata=rule)] == ["u7 likes green tea"]
    assert len(memory.recall("green tea", metadata=rule).results) == 1
    with Memory(**store_at, settings=Settings(embedder="fake")) as other:
        other.remember("u7 drinks coffee at work", metadata={"user_id": "u7"})
    assert len(memory.recall("u7 tea coffee", k=10, metadata=rule).results) == 2
    memory.forget([first.id])
    found = memory.recall("u7 drinks coffee", k=10, metadata=rule).results
    assert [r.memory.content for r in found] == ["u7 drinks coffee at work"]
    with Memory(**store_at, settings=Settings(embedder="fake")) as other:
        other.forget([r.id for r in other.list(10, metadata=rule)])
    assert memory.recall("u7 drinks coffee", k=10, metadata=rule).results == ()


#: Values Python holds equal (``True == 1 == 1.0``) that a filter tells apart, as JSON does.
ALIKE: list[Any] = [True, 1, 1.0, False, 0, 0.0]


@pytest.mark.parametrize("order", [ALIKE, ALIKE[::-1]], ids=["bool-first", "float-first"])
def test_true_one_and_one_point_zero_are_told_apart(memory: Memory, order: list[Any]) -> None:
    """A filter matches by JSON type and value as written, on recall as on list, whichever
    of the values Python holds equal was asked about first."""
    memory.remember_many(
        [{"content": f"n is {json.dumps(v)}", "metadata": {"n": v}} for v in ALIKE]
    )
    for value in order:
        wanted = [f"n is {json.dumps(value)}"]
        assert [r.content for r in memory.list(10, metadata={"n": value})] == wanted
        recalled = memory.recall("n is", k=10, metadata={"n": value}).results
        assert [r.memory.content for r in recalled] == wanted, value
    both = memory.recall("n is", k=10, metadata={"n": [1, True]}).results
    assert {r.memory.content for r in both} == {"n is 1", "n is true"}
