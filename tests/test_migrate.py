"""``slm migrate``: a lossless, resumable copy between stores of either kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from slm import Memory, Settings
from slm.cli import cli
from slm.copy.stores import migrate
from slm.ingest.text import terms as text_terms
from slm.store import Location

FAKE = Settings(embedder="fake")
PAIRS = [("sqlite", "sqlite"), ("sqlite", "postgres"), ("postgres", "sqlite")]


@pytest.fixture(params=PAIRS, ids="->".join)
def ends(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """A source and a target location (file path or postgresql:// URL), both new."""

    def location(kind: str, name: str) -> str:
        if kind == "sqlite":
            return str(tmp_path / f"{name}.db")
        server = request.getfixturevalue("postgres_server")
        dsn: str = server.fresh_database()
        request.addfinalizer(lambda: server.drop_database(dsn))
        return dsn

    source_kind, target_kind = request.param
    return location(source_kind, "source"), location(target_kind, "target")


def open_memory(location: str, profile: str = "default") -> Memory:
    return Memory(Location.parse(location), profile=profile, settings=FAKE)


def populate(location: str) -> None:
    """Two profiles; sessions, tags, metadata, times, confidence, feedback, and a gap left
    by a forgotten memory."""
    session = {"conversation": "c1", "session": 1}
    with open_memory(location, "alice") as alice:
        alice.remember_many(
            [
                {
                    "content": "Ann: we flew to Paris yesterday",
                    "event_time": "2023-05-08T13:56:00Z",
                    "metadata": {**session, "dia_id": "D1:1"},
                    "source": "chat",
                    "tags": ["trip", "paris"],
                    "confidence": 0.7,
                },
                {
                    "content": "Bob: Paris in May sounds lovely, Ann",
                    "event_time": "2023-05-08T13:57:00.123456Z",
                    "metadata": session,
                    "source": "chat",
                },
                {"content": "Grocery list: eggs, flour, nutmeg", "recorded_at": "2022-01-01"},
            ]
        )
        gone = alice.remember("a passing thought about nothing much")
        alice.remember("Ann booked a second trip to Paris for July 2024", source="agent")
        alice.remember("Ann booked a second trip to Paris for July 2024 again", source="agent")
        alice.forget([gone.id])
        top = alice.recall("Paris trip").results[0]
        for useful in (True, False, True):
            alice.feedback(top.id, useful=useful)
    with open_memory(location, "bob") as bob:
        bob.remember("Bob's secret: the spare key is under the mat", source="bob")


def snapshot(location: str, profile: str) -> dict[str, Any]:
    """Everything a copy must keep, with internal keys replaced by memory ids."""
    with open_memory(location, profile) as memory:
        store = memory.store
        records = store.scan(profile, 0, 10_000)
        keys = [r.key for r in records]
        id_of = {r.key: r.id for r in records}
        words = sorted({t for r in records for t in text_terms(r.content)})
        postings = store.postings(profile, words, 10_000)
        mentions = store.memory_entities(profile, keys)
        edges = memory.indexes.edges.edges_from(profile, keys)
        return {
            "records": [r.to_dict() for r in records],
            "vectors": memory.indexes.vectors.get(profile, keys).tobytes(),
            "feedback": store.feedback.trust(profile, {r.source or "" for r in records}),
            "entities": {
                id_of[k]: sorted((n, c, s) for _, n, c, s in v) for k, v in mentions.items()
            },
            "edges": sorted(
                (id_of[k], id_of[dst], kind, round(weight, 4))
                for k, out in edges.items()
                for dst, kind, weight in out
            ),
            "times": {id_of[k]: v for k, v in store.referenced_times(profile, keys).items()},
            "postings": {
                term: [
                    (id_of[k], tf, dl)
                    for k, tf, dl in zip(p.keys.tolist(), p.tf.tolist(), p.dl.tolist(), strict=True)
                ]
                for term, p in postings.items()
            },
            "stats": store.lexical_stats(profile, words),
            "recall": [r.id for r in memory.recall("Ann Paris trip in July").results],
        }


def test_a_copy_keeps_everything(ends: tuple[str, str]) -> None:
    source, target = ends
    populate(source)
    reports = migrate(source, target, settings=FAKE)
    assert [(r.profile, r.read, r.copied, r.existing, r.renamed) for r in reports] == [
        ("alice", 5, 5, 0, 0),
        ("bob", 1, 1, 0, 0),
    ]
    expected = {p: snapshot(source, p) for p in ("alice", "bob")}
    assert expected["alice"]["edges"] and expected["alice"]["feedback"]  # there is a graph
    for profile, wanted in expected.items():
        assert snapshot(target, profile) == wanted
    again = migrate(source, target, settings=FAKE)
    assert [(r.copied, r.existing) for r in again] == [(0, 5), (0, 1)]
    assert snapshot(target, "alice") == expected["alice"]  # feedback is not added twice


def test_an_interrupted_copy_resumes(ends: tuple[str, str]) -> None:
    source, target = ends
    with open_memory(source) as memory:
        memory.remember_many(
            [{"content": f"fact number {i}", "metadata": {"session": i // 5}} for i in range(45)]
        )

    class Interrupted(Exception):
        pass

    batches: list[int] = []

    def stop_after_two(read: int) -> None:
        batches.append(read)
        if len(batches) == 2:
            raise Interrupted

    with pytest.raises(Interrupted):
        migrate(source, target, settings=FAKE, batch=10, progress=stop_after_two)
    with open_memory(target) as copy:
        assert copy.count() == 20
    (report,) = migrate(source, target, settings=FAKE, batch=10)
    assert (report.read, report.copied, report.existing) == (45, 25, 20)
    copied, original = snapshot(target, "default"), snapshot(source, "default")
    # These texts are equally similar to one another, so which three become "similar"
    # neighbours is decided by rounding, which differs between one batch and five.
    for state in (copied, original):
        state["edges"] = [e for e in state["edges"] if e[2] != "similar"]
    assert copied == original


def test_a_taken_id_is_replaced(tmp_path: Path) -> None:
    source, target = str(tmp_path / "s.db"), str(tmp_path / "t.db")
    with open_memory(source) as memory:
        mine = memory.remember("mine")
    with open_memory(target, "other") as other:
        other.remember_many([{"content": "theirs", "id": mine.id}])
    (report,) = migrate(source, target, settings=FAKE)
    assert (report.copied, report.renamed) == (1, 1)
    with open_memory(target) as copy:
        [copied] = copy.list()
    assert copied.content == "mine" and copied.id != mine.id


def test_cli_migrate(ends: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    source, target = ends
    populate(source)
    monkeypatch.setenv("SLM_EMBEDDER", "fake")
    runner = CliRunner()
    only_bob = ["--profile", "bob", "migrate", "--from", source, "--to", target, "--json"]
    result = runner.invoke(cli, only_bob)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [
        {"profile": "bob", "read": 1, "copied": 1, "existing": 0, "renamed": 0}
    ]
    result = runner.invoke(cli, ["migrate", "--from", source, "--to", target])
    assert result.exit_code == 0, result.output
    assert "alice: read 5, copied 5, already present 0" in result.output
    assert "bob: read 1, copied 0, already present 1" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "missing.db", "--to", "x.db"], "no store at"),
        (["--from", "same.db", "--to", "same.db"], "the same store"),
    ],
)
def test_cli_migrate_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLM_EMBEDDER", "fake")
    result = CliRunner().invoke(cli, ["migrate", *args])
    assert result.exit_code == 1
    assert message in result.output


def test_a_copy_keeps_validity_and_links(ends: tuple[str, str]) -> None:
    source, target = ends
    with open_memory(source) as memory:
        old = memory.remember("I live in Berlin.", event_time="2022-01-01")
        memory.update(old.id, "I moved to Lisbon.", event_time="2024-01-01")
        memory.remember("Jordan works at Initech.", event_time="2022-01-01")
        memory.remember("Jordan joined Globex.", event_time="2024-06-01")
        memory.remember("Ferns like shade.", valid_from="2021-01-01", event_time="2023-01-01")
        wanted = [r.to_dict() for r in memory.list()]
        wanted_links = links(memory)
    assert any(slot for _, _, slot in wanted_links)  # a probable update, not only the explicit
    migrate(source, target, settings=FAKE)
    with open_memory(target) as copy:
        assert [r.to_dict() for r in copy.list()] == wanted
        assert links(copy) == wanted_links
        assert [r.memory.content for r in copy.recall("where do I live").results] == [
            "I moved to Lisbon."
        ]


def links(memory: Memory) -> set[tuple[str, str, str]]:
    keys = [r.key for r in memory.store.scan(memory.profile, 0, 10_000)]
    return {
        (u.older_id, u.newer_id, u.slot)
        for u in memory.store.versions.updates(memory.profile, keys)
    }
