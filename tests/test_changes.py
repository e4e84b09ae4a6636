"""Changes found by meaning (slm.ingest.changes): the reader's rules on fixed cosines, then
the real model on both stores, through remember, recall, forget, reindex and the auto
policy."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from slm import InvalidInput, Memory, NotFound
from slm.ingest import changes
from slm.ingest.changes import judge, read
from slm.models import to_micros
from slm.settings import Settings

T0 = to_micros(datetime(2024, 1, 10, tzinfo=UTC))
T1 = to_micros(datetime(2024, 6, 2, tzinfo=UTC))


def _pair(older: str, newer: str, cosine: float = 0.7) -> tuple[float, str] | None:
    return judge(read(newer, None, T1), read(older, None, T0), cosine)


def test_a_restated_fact_in_other_words_is_a_change() -> None:
    judged = _pair(
        "Ravi drives a battered old Toyota pickup.", "Ravi finally sold the pickup for a Kia."
    )
    assert judged is not None
    score, evidence = judged
    assert score == pytest.approx(0.7 + changes.CUE_BONUS)
    assert evidence == "meaning: cosine 0.70, cue 'sold', subject ravi"


def test_what_is_not_a_change() -> None:
    older = "Ravi drives a battered old Toyota pickup."
    # someone else: a relative of the subject, or the speaker against a person named
    assert _pair(older, "Ravi's brother drives an electric Kia now.") is None
    assert _pair("My sister lives in Berlin.", "I live in a flat in Porto now.") is None
    # no value yet: a plan, a question, the assistant's words
    assert _pair(older, "Ravi might buy an electric Kia next year.") is None
    assert _pair(older, "Does Ravi still drive the pickup?") is None
    assert (
        judge(read("assistant: Ravi drives a Kia now.", None, T1), read(older, None, T0), 0.9)
        is None
    )
    # too far apart in meaning
    assert _pair(older, "Ravi sold the pickup for a Kia.", cosine=0.4) is None
    # no word announcing a change, and no new value (a name or a number)
    assert _pair(older, "Ravi washed the old pickup.") is None
    # a conversation goes on: a turn like an earlier one, with no word announcing a change
    vespa = "Ravi: My Vespa gets me to work."
    assert _pair(vespa, "Ravi: My Brompton gets me to work.") is None
    assert _pair(vespa, "Ravi: I sold the Vespa and bought a Brompton.") is not None
    # another speaker's words, and a name used to address someone, are not the subject
    assert _pair(vespa, "Mia: I sold the Vespa and bought a Brompton.") is None
    assert "mel" not in (read("Thanks, Mel! I drive a Kia.", None, T1).subject or ())
    # the fact reader names two attributes of one person: not the same fact
    assert _pair("Tara works at Initech.", "Tara lives in Porto now.") is None
    # the old value mentioned again, with nothing announcing a change
    assert _pair("Kenji lives in Osaka.", "Kenji visited Osaka for the holidays.") is None
    # not later
    assert judge(read(older, None, T0), read("Ravi sold it for a Kia.", None, T1), 0.9) is None


def test_a_chain_links_each_value_to_the_one_before() -> None:
    readings = [
        read("Ravi drives a battered old Toyota pickup.", None, T0),
        read("Ravi traded the pickup for a Honda Civic.", None, T0 + 10),
        read("Ravi sold the Civic and now rides an e-bike.", None, T0 + 20),
    ]
    within = [[(1, 0.7), (2, 0.66)], [(0, 0.7), (2, 0.68)], [(0, 0.66), (1, 0.68)]]
    found = changes.find(readings, [[], [], []], within, {})
    assert found[0] == ()
    assert [(c.older, c.in_batch) for c in found[1]] == [(0, True)]
    # the first value was already replaced by the second: the third replaces the second
    assert [(c.older, c.in_batch) for c in found[2]] == [(1, True)]
    assert found[2][0].sure


COFFEE_OLD = "Priya's go-to coffee order is a flat white."
COFFEE_NEW = "Priya switched to cortados, the flat whites got too milky for her."


def test_a_change_in_other_words_is_linked_and_recalled_first(real_memory: Memory) -> None:
    old = real_memory.remember(COFFEE_OLD, event_time="2023-03-01T09:00:00Z")
    real_memory.remember("Priya's team meets on Tuesdays.", event_time="2023-05-01T09:00:00Z")
    new = real_memory.store_many([{"content": COFFEE_NEW, "event_time": "2024-02-01T09:00:00Z"}])[0]
    assert new.updates == (old.id,)  # remember says what it probably updates
    keys = [r.key for r in real_memory.store.scan(real_memory.profile, 0, 100)]
    (update,) = real_memory.store.versions.updates(real_memory.profile, keys)
    assert update.by_meaning and update.older_id == old.id and update.newer_id == new.memory.id
    assert update.slot.startswith("meaning: cosine 0.") and "subject priya" in update.slot
    response = real_memory.recall("What coffee does Priya order?", k=5)
    ids = [r.id for r in response.results]
    assert ids[0] == new.memory.id
    stale = next(r for r in response.results if r.id == old.id)
    assert stale.possibly_superseded_by == (new.memory.id,)
    assert real_memory.get(old.id).superseded_by is None  # suggest: nothing is ended
    # a rebuild keeps the link; forgetting the newer memory removes it
    real_memory.reindex()
    assert real_memory.store.versions.updates(real_memory.profile, keys)
    real_memory.forget([new.memory.id])
    assert real_memory.store.versions.updates(real_memory.profile, keys) == []


def test_one_batch_is_read_in_time_order(real_memory: Memory) -> None:
    stored = real_memory.remember_many(
        [
            {"content": COFFEE_NEW, "event_time": "2024-02-01T09:00:00Z"},
            {"content": COFFEE_OLD, "event_time": "2023-03-01T09:00:00Z"},
        ]
    )
    keys = [r.key for r in stored]
    (update,) = real_memory.store.versions.updates(real_memory.profile, keys)
    assert (update.older_id, update.newer_id) == (stored[1].id, stored[0].id)


def test_the_auto_policy_ends_only_sure_changes(store_at: dict[str, Any], minilm: Any) -> None:
    settings = replace(Settings(), update_policy="auto")
    with Memory(**store_at, embedder=minilm, settings=settings) as memory:
        old = memory.remember(
            "Ravi drives a battered old Toyota pickup.", event_time="2023-01-01T00:00:00Z"
        )
        new = memory.remember(
            "Ravi finally sold the pickup and now drives an electric Kia.",
            event_time="2024-01-01T00:00:00Z",
        )
        cosine = float(np.dot(*minilm.embed_batch([old.content, new.content])))
        sure = cosine + changes.CUE_BONUS >= changes.SURE_SCORE
        assert memory.get(old.id).superseded_by == (new.id if sure else None)
        other = memory.remember(COFFEE_OLD, event_time="2023-03-01T09:00:00Z")
        memory.remember(COFFEE_NEW, event_time="2024-02-01T09:00:00Z")
        cosine = float(np.dot(*minilm.embed_batch([COFFEE_OLD, COFFEE_NEW])))
        assert cosine + changes.CUE_BONUS < changes.SURE_SCORE  # linked, not sure
        assert memory.get(other.id).superseded_by is None


def test_an_explicit_supersedes_is_left_as_said(real_memory: Memory) -> None:
    old = real_memory.remember(COFFEE_OLD, event_time="2023-03-01T09:00:00Z")
    unrelated = real_memory.remember(
        "Priya's desk is by the window.", event_time="2023-04-01T09:00:00Z"
    )
    new = real_memory.remember(
        COFFEE_NEW, event_time="2024-02-01T09:00:00Z", supersedes=[unrelated.id]
    )
    keys = [old.key, new.key]
    assert not [
        u for u in real_memory.store.versions.updates(real_memory.profile, keys) if u.by_meaning
    ]


def test_a_wrong_link_is_undone_for_good(real_memory: Memory) -> None:
    old = real_memory.remember(COFFEE_OLD, event_time="2023-03-01T09:00:00Z")
    new = real_memory.remember(COFFEE_NEW, event_time="2024-02-01T09:00:00Z")
    real_memory.unlink(old.id, new.id)
    keys = [old.key, new.key]
    assert real_memory.store.versions.updates(real_memory.profile, keys) == []
    response = real_memory.recall("What coffee does Priya order?", k=5)
    assert all(r.possibly_superseded_by == () for r in response.results)
    with pytest.raises(InvalidInput, match="no link to undo"):
        real_memory.unlink(old.id, new.id)
    with pytest.raises(NotFound):
        real_memory.unlink(old.id, "0123456789abcdef")


def test_undoing_a_fact_link_survives_relinking(memory: Memory) -> None:
    first = memory.remember("Ana moved to Porto.", event_time="2022-01-01T00:00:00Z")
    second = memory.remember("Ana moved to Lisbon.", event_time="2023-01-01T00:00:00Z")
    keys = [first.key, second.key]
    assert [u.slot for u in memory.store.versions.updates(memory.profile, keys)] == [
        "ana|residence"
    ]
    memory.unlink(first.id, second.id)
    assert memory.store.versions.updates(memory.profile, keys) == []
    # a later value of the same fact relinks the slot: the undone pair stays undone
    third = memory.remember("Ana moved to Berlin.", event_time="2024-01-01T00:00:00Z")
    pairs = {(u.older_id, u.newer_id) for u in memory.store.versions.updates(memory.profile, keys)}
    assert (first.id, second.id) not in pairs and (second.id, third.id) in pairs
    assert (first.id, third.id) in pairs  # the first links to the next value instead


def test_undoing_an_explicit_supersession_makes_the_older_current(memory: Memory) -> None:
    old = memory.remember("Ana lives in Porto.", event_time="2022-01-01T00:00:00Z")
    new = memory.update(old.id, "Ana's flat has a balcony.").memory
    assert memory.get(old.id).superseded_by == new.id
    memory.unlink(old.id, new.id)
    again = memory.get(old.id)
    assert again.superseded_by is None and again.valid_to is None
