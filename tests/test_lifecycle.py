"""Memory that stays true: validity, explicit replacement, probable updates found at write
time, recall of what holds now or at a past moment (docs/lifecycle.md)."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from slm import InvalidInput, Memory, NotFound, Settings
from slm.copy.jsonl import export_jsonl, import_jsonl
from slm.ingest.asked import asked
from slm.ingest.facts import asks_about_past, facts
from slm.store import schema
from slm.store.sqlite import SQLiteStore

# -- reading facts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "source", "slots"),
    [
        ("I live in Berlin, in a flat in Kreuzberg.", None, {"user|residence": "berlin"}),
        ("I moved to Lisbon; my new flat is in Alfama.", None, {"user|residence": "lisbon"}),
        ("Finally settled in Paris after the move.", None, {"user|residence": "paris"}),
        ("Ana packed up and now calls Porto home.", None, {"ana|residence": "porto"}),
        ("My sister lives in Madrid.", None, {"user's sister|residence": "madrid"}),
        ("Jordan works at Acme Corp as an engineer.", None, {"jordan|employer": "acme corp"}),
        ("Caroline: I work as a nurse at the hospital.", None, {"caroline|job title": "nurse"}),
        ("Sushi is my new favourite food.", "me", {"me|favourite food": "sushi"}),
        ("My rent went up to $1,450 a month.", None, {"user|rent": "$1450"}),
        ("I drive a Toyota Corolla.", None, {"user|car": "toyota corolla"}),
        ("I'd rather have aisle seats from now on.", None, {"user|preference seats": "aisle"}),
        ("Big news: we relocated to Oslo!", None, {"user|residence": "oslo"}),
    ],
)
def test_facts_are_read_from_statements(
    text: str, source: str | None, slots: dict[str, str]
) -> None:
    assert {f.slot: f.value for f in facts(text, source)} == slots


@pytest.mark.parametrize(
    "text",
    [
        "Do you live in Berlin?",  # a question
        "I don't live in Berlin any more.",  # a negation gives no value
        "We might move to Lisbon next year.",  # a plan is not a fact
        "assistant: I live in the cloud, so to speak.",  # the assistant's words
        "I like hiking and I like jazz.",  # not a single-valued attribute
        "Ana visited Madrid for a conference.",
        "I bought a Samsung TV.",  # not a car
        "Moved to the new office downstairs.",  # no place named
    ],
)
def test_no_fact_where_none_is_stated(text: str) -> None:
    assert facts(text) == []


def test_one_attribute_in_other_words_is_one_slot() -> None:
    assert [f.slot for f in facts("My title is staff engineer.")] == ["user|job title"]
    assert [f.slot for f in facts("My salary is 50k.")] == ["user|income"]
    moved = facts("My deadline was moved to Friday.")
    assert [f.slot for f in moved] == [f.slot for f in facts("My deadline is Thursday.")]


@pytest.mark.parametrize(
    ("question", "slots"),
    [
        ("Where do I live?", ("user|residence",)),
        ("Which city is Amara living in now?", ("amara|residence",)),
        ("Where does my sister live?", ("user's sister|residence",)),
        ("Which company employs Mateo?", ("mateo|employer",)),
        ("Who does Jordan work for?", ("jordan|employer",)),
        ("What do I do for a living?", ("user|job title",)),
        ("What is Priya's occupation?", ("priya|job title",)),
        ("What's Bruno's favourite food?", ("bruno|favourite food",)),
        ("What car does Ana drive?", ("ana|car",)),
        ("How much rent does Ana pay?", ("ana|rent",)),
        ("What is my salary?", ("user|income",)),
        ("Which seats do I prefer on flights?", ("user|preference seats",)),
        ("When is my deadline?", ("user|deadline",)),
        ("Who is my dentist?", ("user|dentist",)),
        ("Where did Ana live in March 2023?", ("ana|residence",)),
        ("What did Ana eat for lunch?", ()),
        ("Where is the station?", ()),
        ("What is the capital of France?", ()),
        ("Where does The Office take place?", ()),
    ],
)
def test_the_fact_a_question_asks_about(question: str, slots: tuple[str, ...]) -> None:
    assert asked(question) == slots


def test_stating_the_fact_asked_about_ranks_first(store_at: dict[str, Any], minilm: Any) -> None:
    notes = [
        "Tomas would rather have aisle seats now.",
        "Tomas got promoted to software engineer.",
        "Tomas finally settled in Krakow.",
        "Tomas visited Lisbon for a conference.",
    ]
    with Memory(**store_at, embedder=minilm, settings=Settings()) as memory:
        memory.remember_many([{"content": c} for c in notes])
        top = memory.recall("Where does Tomas live?", k=4, trace=True)
        assert top.results[0].memory.content == "Tomas finally settled in Krakow."
        assert top.trace is not None and top.trace["query"]["facts_asked"] == ["tomas|residence"]
        boosts = {r["rank_position"]: r["fact_boost"] for r in top.trace["results"]}
        assert boosts[1] == Settings().fact_boost and boosts[2] == 0
    with Memory(**store_at, embedder=minilm, settings=Settings(fact_boost=0)) as memory:
        unboosted = memory.recall("Where does Tomas live?", k=4)
    krakow = {
        r.memory.content: r for r in unboosted.results if r.memory.content.endswith("Krakow.")
    }["Tomas finally settled in Krakow."]
    boosted = top.results[0]
    # The boost moves the ranking score; relevance_score keeps its meaning.
    assert boosted.relevance_score == krakow.relevance_score
    assert boosted.ranking_score == pytest.approx(krakow.ranking_score + Settings().fact_boost)


def test_questions_about_the_past() -> None:
    assert asks_about_past("Where did Ana live in March 2023?")
    assert asks_about_past("Where did I work before?")
    assert not asks_about_past("Where does Ana live?")
    assert not asks_about_past("If you were ordering me dinner, what would I want most?")
    assert asks_about_past("If I moved, where were we living then?")


# -- explicit replacement -----------------------------------------------------------------------


def test_update_supersedes_and_keeps_the_old_memory(memory: Memory) -> None:
    old = memory.remember("Standup is at 9:30", event_time="2024-01-01T09:00:00Z", tags=["team"])
    done = memory.update(old.id, "Standup moved to 10:00", event_time="2024-06-01T00:00:00Z")
    assert done.created and done.memory.tags == ("team",)  # fields not given are the old ones
    kept = memory.get(old.id)
    assert kept.superseded_by == done.memory.id
    assert kept.valid_to == datetime(2024, 6, 1, tzinfo=UTC)
    assert kept.to_dict()["valid_to"] == "2024-06-01T00:00:00Z"
    assert done.memory.to_dict()["valid_from"] == "2024-06-01T00:00:00Z"
    assert done.memory.valid_to is None and memory.count() == 2

    now = "2025-01-01T00:00:00Z"
    assert memory.recall("standup", now=now).ids == [done.memory.id]
    both = memory.recall("standup", now=now, include_superseded=True)
    assert set(both.ids) == {old.id, done.memory.id}
    flagged = {r.id: r.to_dict()["superseded_by"] for r in both.results}
    assert flagged == {old.id: done.memory.id, done.memory.id: None}
    assert memory.recall("standup", as_of="2024-03-01T00:00:00Z").ids == [old.id]
    assert memory.recall("standup", as_of="2024-07-01T00:00:00Z").ids == [done.memory.id]
    before = memory.recall("standup", as_of="2000-01-01T00:00:00Z")
    assert before.abstained and before.abstention_reason == "no_candidates"
    later = memory.recall("standup", as_of="2999-01-01T00:00:00Z")
    assert later.ids == [done.memory.id]


def test_remember_supersedes(memory: Memory) -> None:
    a = memory.remember("Office wifi password is tulip42", event_time="2024-01-01")
    b = memory.remember("Office wifi password is daisy77", event_time="2024-02-01")
    c = memory.remember("Office wifi password is lotus11", supersedes=[a.id, b.id])
    assert {memory.get(i).superseded_by for i in (a.id, b.id)} == {c.id}
    assert memory.recall("wifi password").ids == [c.id]


def test_forgetting_the_newer_version_reinstates_the_older(memory: Memory) -> None:
    old = memory.remember("Parking spot is B12", event_time="2024-01-01")
    new = memory.update(old.id, "Parking spot is C3").memory
    memory.forget([new.id])
    back = memory.get(old.id)
    assert back.superseded_by is None and back.valid_to is None
    assert memory.recall("parking spot").ids == [old.id]


def test_identical_content_already_stored_supersedes(memory: Memory) -> None:
    old = memory.remember("Gym opens at 6", event_time="2024-01-01")
    again = memory.remember("Gym opens at 7", event_time="2024-02-01")
    done = memory.store_many([{"content": "Gym opens at 7", "supersedes": [old.id]}])[0]
    assert not done.created and done.memory.id == again.id
    assert memory.get(old.id).superseded_by == again.id


def refuses(memory: Memory, kind: type[Exception], match: str, action: Any) -> None:
    """``action`` raises ``kind`` and stores nothing and changes no validity."""
    before = [r.to_dict() for r in memory.list(100)]
    with pytest.raises(kind, match=match):
        action()
    assert [r.to_dict() for r in memory.list(100)] == before


def test_bad_replacements_store_nothing(memory: Memory, store_at: dict[str, Any]) -> None:
    a = memory.remember("Plant the tomatoes in May", event_time="2024-01-01")
    b = memory.update(a.id, "Plant the tomatoes in April", event_time="2024-02-01").memory
    gone = memory.remember("Temporary note", event_time="2024-01-01")
    memory.forget([gone.id])
    unknown = "0123456789abcdef"
    refuses(memory, NotFound, "no memory", lambda: memory.update(unknown, "x"))
    refuses(memory, NotFound, "to supersede", lambda: memory.remember("x", supersedes=[gone.id]))
    refuses(memory, InvalidInput, "already superseded", lambda: memory.update(a.id, "x"))
    refuses(
        memory,
        InvalidInput,
        "cycle",
        lambda: memory.store_many([{"content": "Plant the tomatoes in May", "supersedes": [b.id]}]),
    )
    refuses(
        memory,
        InvalidInput,
        "itself",
        lambda: memory.store_many(
            [{"content": "Plant the tomatoes in April", "supersedes": [b.id]}]
        ),
    )
    refuses(
        memory,
        InvalidInput,
        "starts",
        lambda: memory.update(b.id, "Plant them in June", event_time="2023-01-01"),
    )
    refuses(
        memory,
        InvalidInput,
        "twice",
        lambda: memory.remember_many(
            [{"content": "one", "supersedes": [b.id]}, {"content": "two", "supersedes": [b.id]}]
        ),
    )
    refuses(memory, InvalidInput, "supersedes", lambda: memory.remember("x", supersedes=["nope"]))
    refuses(
        memory,
        InvalidInput,
        "valid_to",
        lambda: memory.remember_many(
            [{"content": "x", "valid_from": "2024-05-01", "valid_to": "2024-01-01"}]
        ),
    )
    refuses(
        memory,
        InvalidInput,
        "superseded_by needs valid_to",
        lambda: memory.remember_many([{"content": "x", "superseded_by": b.id}]),
    )
    with Memory(**store_at, profile="other", settings=Settings(embedder="fake")) as other:
        with pytest.raises(NotFound):
            other.update(b.id, "not yours")
        with pytest.raises(NotFound):
            other.remember("not yours", supersedes=[b.id])
        assert other.count() == 0
    with pytest.raises(InvalidInput, match="as_of"):
        memory.recall("tomatoes", as_of="2024-01-01", include_superseded=True)
    with pytest.raises(InvalidInput, match="as_of"):
        memory.recall("tomatoes", as_of="last tuesday")


# -- probable updates ---------------------------------------------------------------------------


def test_probable_updates_are_linked_and_reported(memory: Memory) -> None:
    berlin = memory.remember("I live in Berlin, in a flat in Kreuzberg.", event_time="2022-03-01")
    plans = memory.remember("I might move to Porto one day.", event_time="2023-01-01")
    lisbon = memory.store_many(
        [{"content": "I moved to Lisbon; my new flat is in Alfama.", "event_time": "2025-01-15"}]
    )[0]
    assert lisbon.updates == (berlin.id,) and lisbon.to_dict()["updates"] == [berlin.id]
    assert memory.get(berlin.id).superseded_by is None  # suggest: nothing superseded
    result = memory.recall("Berlin Kreuzberg flat", include_superseded=True)
    older = next(r for r in result.results if r.id == berlin.id)
    assert older.possibly_superseded_by == (lisbon.memory.id,)
    assert older.to_dict()["possibly_superseded_by"] == [lisbon.memory.id]
    assert plans.id not in str(links(memory))  # a plan states no value
    assert links(memory) == {(berlin.id, lisbon.memory.id, "user|residence")}


def test_links_do_not_depend_on_arrival_order(memory: Memory) -> None:
    items = [
        {"content": "Priya works at Initech.", "event_time": "2021-01-01"},
        {"content": "Priya joined Globex.", "event_time": "2023-01-01"},
        {"content": "Priya started a new job at Hooli.", "event_time": "2024-01-01"},
    ]
    memory.remember_many([items[2], items[0]])
    memory.remember_many([items[1]])
    records = {r.content: r for r in memory.list(10)}
    keys = [r.key for r in records.values()]
    pairs = {(u.older_id, u.newer_id) for u in memory.store.versions.updates(memory.profile, keys)}
    ids = [records[i["content"]].id for i in items]
    assert pairs == {(ids[0], ids[1]), (ids[1], ids[2])}
    memory.forget([ids[1]])  # the middle version goes: its neighbours link up
    keys = [r.key for r in memory.list(10)]
    pairs = {(u.older_id, u.newer_id) for u in memory.store.versions.updates(memory.profile, keys)}
    assert pairs == {(ids[0], ids[2])}


def test_auto_policy_supersedes_and_deletes_nothing(store_at: dict[str, Any]) -> None:
    settings = Settings(embedder="fake", update_policy="auto")
    with Memory(**store_at, settings=settings) as memory:
        old = memory.remember("Jordan works at Initech.", event_time="2022-01-01")
        new = memory.remember("Jordan just joined Globex.", event_time="2024-09-01")
        assert memory.count() == 2
        assert memory.get(old.id).superseded_by == new.id
        assert memory.get(old.id).valid_to == datetime(2024, 9, 1, tzinfo=UTC)
        assert old.id not in memory.recall("Jordan work Initech").ids


NOTES = [
    ("I live in Berlin, in a flat in Kreuzberg.", "2022-03-01"),
    ("Jordan works at Initech as a data analyst.", "2022-05-01"),
    ("My favourite coffee shop is Bonanza.", "2022-07-01"),
    ("I started learning Portuguese with an app.", "2023-01-10"),
    ("Dentist appointment on Tuesday at 9.", "2024-02-01"),
    ("Bought a new bike for commuting.", "2024-04-01"),
    ("Jordan just joined Globex; he is excited about the new team.", "2024-09-01"),
    ("Mum's birthday is on the 14th of March.", "2022-01-05"),
    ("The team offsite is in Porto this year.", "2024-05-01"),
    ("I moved to Lisbon; my new flat is in Alfama.", "2025-01-15"),
    ("Book club meets on the first Thursday of the month.", "2023-03-01"),
    ("I visited Berlin again for a conference in November.", "2025-11-20"),
]


def test_the_current_value_is_recalled_first(store_at: dict[str, Any], minilm: Any) -> None:
    with Memory(**store_at, embedder=minilm, settings=Settings()) as memory:
        memory.remember_many([{"content": c, "event_time": t} for c, t in NOTES])
        where = memory.recall("Where do I live?", now="2025-06-01", k=10)
        assert where.results[0].memory.content.startswith("I moved to Lisbon")
        work = memory.recall("Where does Jordan work?", now="2025-06-01", k=10)
        assert work.results[0].memory.content.startswith("Jordan just joined Globex")
        then = memory.recall("Where did I live in 2023?", now="2025-06-01", k=10)
        assert then.results[0].memory.content.startswith("I live in Berlin")
        past = memory.recall("Where do I live?", as_of="2023-06-01", k=10)
        assert past.results[0].memory.content.startswith("I live in Berlin")
        assert "Lisbon" not in " ".join(r.memory.content for r in past.results)


def test_the_current_value_carries_the_relevance_it_replaced(
    store_at: dict[str, Any], minilm: Any
) -> None:
    """A minimum relevance never returns the stale value alone: the current version answers
    as strongly as the version it replaced (probable and stated), and the trace says so."""
    with Memory(**store_at, embedder=minilm, settings=Settings()) as memory:
        porto = memory.remember("I live in Porto", event_time="2026-01-10T10:00:00Z")
        lisbon = memory.remember("We moved to Lisbon last month", event_time="2026-06-10T10:00:00Z")
        assert lisbon.updates == (porto.id,)
        strong = memory.recall("Where do I live?", min_relevance=0.5, now="2026-07-01")
        assert strong.ids[:2] == [lisbon.id, porto.id]
        first, second = strong.results[:2]
        assert first.relevance_score == second.relevance_score >= 0.5
        traced = memory.recall("Where do I live?", now="2026-07-01", trace=True)
        assert traced.trace is not None
        sources = {r["id"]: r["relevance_from"] for r in traced.trace["results"]}
        assert sources[lisbon.id] == porto.id and sources[porto.id] is None
        # Asked about January, Porto is the current value: Lisbon carries nothing.
        then = memory.recall("Where do I live?", as_of="2026-02-01", trace=True)
        assert then.ids[0] == porto.id and lisbon.id not in then.ids
        # Stated: hidden, the replaced version leaves its place and relevance to the current.
        car = memory.remember("I drive a red Fiat Panda", event_time="2026-01-10T10:00:00Z")
        volvo = memory.update(car.id, "Sold it, a Volvo now", event_time="2026-09-01T10:00:00Z")
        asked = memory.recall("What car do I drive?", min_relevance=0.5, now="2026-10-01")
        assert asked.ids[0] == volvo.id and car.id not in asked.ids
        shown = memory.recall(
            "What car do I drive?", min_relevance=0.5, now="2026-10-01", include_superseded=True
        )
        assert shown.ids[:2] == [volvo.id, car.id]
        assert shown.results[0].relevance_score == shown.results[1].relevance_score


# -- carried by export, import, migrate, backup and schema migration ------------------------------


def test_export_import_round_trip_keeps_validity(memory: Memory, tmp_path: Path) -> None:
    old = memory.remember("I live in Berlin.", event_time="2022-01-01")
    memory.update(old.id, "I moved to Lisbon.", event_time="2024-01-01")
    memory.remember("Jordan works at Initech.", event_time="2022-01-01")
    memory.remember("Jordan joined Globex.", event_time="2024-01-01")
    out = tmp_path / "dump.jsonl"
    with open(out, "w", encoding="utf-8") as handle:
        export_jsonl(memory, handle)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {"valid_from", "valid_to", "superseded_by"} <= set(rows[0])
    with Memory(tmp_path / "copy.db", settings=Settings(embedder="fake")) as copy:
        import_jsonl(copy, out)
        assert [r.to_dict() for r in copy.list()] == [r.to_dict() for r in memory.list()]
        assert links(copy) == links(memory)


def links(memory: Memory) -> set[tuple[str, str, str]]:
    keys = [r.key for r in memory.store.scan(memory.profile, 0, 10_000)]
    return {
        (u.older_id, u.newer_id, u.slot)
        for u in memory.store.versions.updates(memory.profile, keys)
    }


def test_an_older_store_gains_validity(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # the schema before validity existed
        for number, version in enumerate(schema.versions(SQLiteStore.dialect, 384)[:7], 1):
            version.apply(db, "?")
            db.execute(f"PRAGMA user_version={number}")
        db.execute(
            "INSERT INTO memories (id, profile, content, content_hash, event_time, recorded_at,"
            " source, confidence, metadata, tags) VALUES "
            "('00000000000000aa', 'default', 'old fact', 'h', 0, 0, NULL, 1.0, '{}', '[]')"
        )
    with Memory(path, settings=Settings(embedder="fake")) as memory:
        record = memory.get("00000000000000aa")
        assert record.valid_from is None and record.valid_to is None
        assert record.to_dict()["valid_from"] == "1970-01-01T00:00:00Z"
        new = memory.update(record.id, "new fact")
        assert memory.get(record.id).superseded_by == new.memory.id


def test_a_backup_keeps_validity_and_links(tmp_path: Path) -> None:
    from slm.copy.backup import backup

    with Memory(tmp_path / "live.db", settings=Settings(embedder="fake")) as memory:
        old = memory.remember("I live in Berlin.", event_time="2022-01-01")
        memory.update(old.id, "I moved to Lisbon.", event_time="2024-01-01")
        memory.remember("Jordan works at Initech.", event_time="2022-01-01")
        memory.remember("Jordan joined Globex.", event_time="2024-01-01")
        backup(memory, tmp_path / "copy.db")
        wanted = [r.to_dict() for r in memory.list()], links(memory)
    with Memory(tmp_path / "copy.db", settings=Settings(embedder="fake")) as copy:
        assert ([r.to_dict() for r in copy.list()], links(copy)) == wanted
        assert copy.get(old.id).superseded_by is not None
