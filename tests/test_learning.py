"""Learning from use: the ranking model, reranking under the score contract, query ids,
feedback (stored, listed, exported, erased, refused when wrong) and a profile's learning
with its guard rails."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slm import Memory, Settings
from slm.copy.jsonl import export_jsonl, import_jsonl
from slm.errors import InvalidInput, ModelError, NotFound
from slm.learn import adapt
from slm.learn.features import FEATURES, WINDOW
from slm.learn.model import COLUMNS, Example, Ranker, default_ranker, expand, fit, order
from slm.learn.rerank import Reranking

NOTES = [
    "The boiler is serviced every October by Kelvin Heating",
    "Ana prefers green tea in the afternoon",
    "The team standup moved to 9:30 on Mondays",
    "Ana's passport expires in March 2027",
    "Kelvin Heating's phone number is 555-0142",
    "The garden shed key hangs behind the kitchen door",
    "Ana is allergic to cats",
    "The boiler pressure should stay between 1 and 1.5 bar",
    "Tea for the office is ordered from Leafwise every month",
    "The car's MOT is due in September",
]


def column(name: str) -> int:
    return COLUMNS.index(name)


def ranker_from(weights: dict[str, float]) -> Ranker:
    """A model that scores the named columns (raw values, no standardisation)."""
    w = np.zeros(len(COLUMNS))
    for name, value in weights.items():
        w[column(name)] = value
    return Ranker(w, np.zeros(len(COLUMNS)), np.ones(len(COLUMNS)), "test", shift_limit=None)


def fill(memory: Memory) -> None:
    memory.remember_many([{"content": text, "source": "notes"} for text in NOTES])


# -- the model -----------------------------------------------------------------------------


def synthetic(count: int, seed: int, informative: str = "lexical") -> list[Example]:
    """Windows where the useful row is the one with the highest ``informative`` feature."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        matrix = rng.random((12, len(FEATURES)))
        best = int(np.argmax(matrix[:, FEATURES.index(informative)]))
        out.append(Example(matrix, tuple(1 if i == best else 0 for i in range(12))))
    return out


def test_fit_learns_the_informative_feature_and_is_deterministic() -> None:
    train, test = synthetic(200, 0), synthetic(100, 1)
    model = fit(train)
    assert model.id == fit(train).id
    top = sum(e.labels[order(model, e)[0]] for e in test) / len(test)
    unordered = sum(e.labels[0] for e in test) / len(test)
    assert top > 0.7 > unordered + 0.5
    assert model.weights[column("lexical")] == max(model.weights[: len(FEATURES)])


def test_expand_appends_every_product_once() -> None:
    matrix = np.arange(len(FEATURES), dtype=float)[None, :] + 1
    expanded = expand(matrix)
    assert expanded.shape == (1, len(COLUMNS))
    assert (
        expanded[0, column("fused*position")]
        == matrix[0, FEATURES.index("fused")] * (matrix[0, FEATURES.index("position")])
    )


def test_model_json_round_trips_and_bad_files_are_refused(tmp_path: Path) -> None:
    model = fit(synthetic(50, 2))
    again = Ranker.from_json(model.to_json())
    assert again.id == model.id and np.allclose(again.weights, model.weights)
    bad = {
        "not json": "{",
        "another format": json.dumps({"format": "other"}),
        "another version": json.dumps({"format": "slm-ranker", "version": 99}),
        "other features": model.to_json().replace('"rr_semantic"', '"rr_other"'),
        "short weights": json.dumps({**json.loads(model.to_json()), "weights": [1.0]}),
        "not finite": model.to_json().replace(
            json.dumps(json.loads(model.to_json())["weights"][0]), "NaN", 1
        ),
    }
    for name, text in bad.items():
        with pytest.raises(ModelError):
            Ranker.from_json(text, name)
    with pytest.raises(ModelError, match="does not compute \\(rr_other\\)"):
        Ranker.from_json(bad["other features"])
    repeated = json.loads(model.to_json())
    repeated["features"][1] = repeated["features"][0]
    with pytest.raises(ModelError, match="distinct"):
        Ranker.from_json(json.dumps(repeated))
    missing = tmp_path / "missing.json"
    with pytest.raises(ModelError, match="cannot read"):
        Ranker.load(missing)


def test_a_score_is_the_weighted_standardised_expansion_of_the_features() -> None:
    """:meth:`Ranker.score` computes ``w . (expand(f) - mean) / scale`` as a quadratic form
    of ``f``: the same numbers to within rounding, for the shipped model and a fitted one,
    on windows of any size (one row, none)."""
    rng = np.random.default_rng(7)
    fitted = fit(synthetic(40, 5))
    for model in (default_ranker(), fitted):
        assert model is not None
        n = len(model.features)
        for rows in (0, 1, 50):
            window = rng.random((rows, n)) * rng.choice([0.0, 1.0, 3.0], size=(rows, n))
            expanded = (expand(window, model.features) - model.mean) / model.scale
            assert np.allclose(model.score(window), expanded @ model.weights, rtol=0, atol=1e-9)
        assert model.allows(model.shift(window)) == model.applies(window)


def test_a_model_reranks_windows_like_any_kind_it_was_trained_on() -> None:
    """One model for two kinds of store: a window near either kind's anchor is reranked,
    one far from both keeps its order; anchors round-trip through the file and a bad one
    is refused."""
    near, far = synthetic(60, 3), synthetic(60, 4)
    shifted = [Example(e.matrix + 5.0, e.labels) for e in far]
    model = fit([*near, *shifted], kinds={"near": near, "shifted": shifted})
    assert [a.name for a in model.anchors] == ["near", "shifted"]
    assert model.applies(near[0].matrix) and model.applies(shifted[0].matrix)
    assert not model.applies(near[0].matrix + 2.5)  # between the two kinds, like neither
    alone = fit(near)
    assert alone.anchors == () and not alone.applies(shifted[0].matrix)
    again = Ranker.from_json(model.to_json())
    assert again.id == model.id and again.applies(shifted[0].matrix)
    assert again.shift(near[1].matrix) == pytest.approx(model.shift(near[1].matrix))
    broken = json.loads(model.to_json())
    broken["anchors"][1]["scale"][0] = 0.0
    with pytest.raises(ModelError, match=r"anchors\[1\]\.scale must be positive"):
        Ranker.from_json(json.dumps(broken))
    broken["anchors"] = [{"name": "x", "mean": [1.0]}]
    with pytest.raises(ModelError, match=r"anchors\[0\]\.mean must be a list of"):
        Ranker.from_json(json.dumps(broken))


def test_the_shipped_model_loads() -> None:
    model = default_ranker()
    assert model.id.startswith("ranker-") and "dev" in model.trained_on


# -- reranking under the score contract ----------------------------------------------------


def test_reranking_changes_order_and_ranking_score_only(memory: Memory) -> None:
    fill(memory)
    question = "When is the boiler serviced and what pressure should it have?"
    plain = memory.recall_with(None, question, k=10)
    # A model that prefers the candidates ranked last: the order must change.
    reverse = Reranking(ranker_from({"position": -1.0}), "reverse", "file")
    reranked = memory.recall_with(reverse, question, k=10, trace=True)
    assert len(plain.results) > 2
    assert reranked.abstained == plain.abstained
    assert reranked.abstention_reason == plain.abstention_reason
    assert {r.id: r.relevance_score for r in reranked.results} == {
        r.id: r.relevance_score for r in plain.results
    }
    assert {r.id: r.trust_score for r in reranked.results} == {
        r.id: r.trust_score for r in plain.results
    }
    assert reranked.ids == plain.ids[::-1]
    scores = [r.ranking_score for r in reranked.results]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    assert [r.rank_position for r in reranked.results] == list(range(1, len(scores) + 1))
    assert reranked.trace is not None
    traced = reranked.trace["rerank"]
    assert traced["model"] == "reverse" and traced["origin"] == "file"
    assert traced["reordered"] == len(reranked.results) and traced["shift_limit"] is None
    # Each result says what the reranker read of it, by feature name, and each channel's
    # part and share of its fused score (what the page and `slm trace` show).
    from slm.learn.features import feature_names

    for result, detail in zip(reranked.results, reranked.trace["results"], strict=True):
        assert set(detail["features"]) == set(feature_names())
        assert detail["features"]["answer_type"] in (0.0, 1.0)
        assert 0.0 <= detail["features"]["focus"] <= 1.0
        channels = detail["channels"]
        assert set(channels) == set(result.channels)
        assert abs(sum(c["share"] for c in channels.values()) - 1.0) < 1e-5
        weights, k = reranked.trace["fusion"]["weights"], reranked.trace["fusion"]["k"]
        for name, c in channels.items():
            assert c["part"] == pytest.approx(weights[name] / (k + c["rank"]), abs=1e-6)
    unread = memory.recall_with(None, question, k=10, trace=True).trace
    assert unread is not None and all(d["features"] is None for d in unread["results"])


def test_the_reranker_reads_a_reply_and_the_names_it_brings(memory: Memory) -> None:
    """A turn that answers a question asked in the turn before it is read as a reply (the
    turn before is read even when it is not a candidate), with how alike the question is to
    the turn it replies to, and the names it brings that the question does not name are
    counted."""
    from slm.learn.reading import asks, new_names

    turns = memory.remember_conversation(
        {
            "session": "convention",
            "messages": [
                {"role": "user", "name": "Gina", "content": "How was the convention, Nate?"},
                {
                    "role": "user",
                    "name": "Nate",
                    "content": "We played the game Catan with Joanna all day.",
                },
                {"role": "user", "name": "Gina", "content": "That sounds like a lot of fun."},
                {"role": "user", "name": "Gina", "content": "Did Nate win the game?"},
            ],
        }
    )
    reverse = Reranking(ranker_from({"position": -1.0}), "reverse", "file")
    response = memory.recall_with(
        reverse, "Which game did Nate play at the convention?", k=10, trace=True
    )
    assert response.trace is not None
    read = {r.id: d["features"] for r, d in zip(response.results, response.trace["results"],
                                                 strict=True)}  # fmt: skip
    assert read[turns[1].id]["reply"] == 1.0
    assert read[turns[1].id]["new_names"] == pytest.approx(np.log1p(2))  # Catan, Joanna
    assert set(read) == {t.id for t in turns}
    assert read[turns[2].id]["reply"] == 0.0
    # How alike the question is to the turn replied to: another speaker's turn only.
    assert read[turns[1].id]["replied_to"] == pytest.approx(read[turns[0].id]["semantic"])
    assert read[turns[1].id]["replied_to"] > 0.0
    assert read[turns[3].id]["replied_to"] == 0.0  # Gina going on after herself replies to nobody
    assert asks("How was it? I hope well") and not asks("Great. " + "x" * 90 + "?" + "y" * 90)
    assert new_names("Did Ana meet Leo?", "Maya: I saw Ana, Leo and Kenji in Porto") == 2


def test_what_was_read_is_said_in_words() -> None:
    from slm.learn.reading import describe

    plain = {"answer_type": 1.0, "focus": 0.5, "channels": 0.5, "reply": 0.0, "replied_to": 0.0}
    assert (
        describe(plain) == "holds the kind of value asked for, focus 0.50, found by 50% of channels"
    )
    replying = {**plain, "answer_type": 0.0, "reply": 1.0, "replied_to": 0.61}
    assert describe(replying).endswith("replies to a question of similarity 0.61 to the question")
    assert describe({**plain, "reply": 1.0}).endswith("follows a question")


def test_an_abstaining_recall_still_abstains_with_the_reranker(memory: Memory) -> None:
    fill(memory)
    reverse = Reranking(ranker_from({"position": -1.0}), "reverse", "file")
    response = memory.recall_with(reverse, "quantum chromodynamics lattice gauge")
    assert response.abstained and response.results == ()


def test_the_window_is_observed_with_one_row_per_candidate(memory: Memory) -> None:
    fill(memory)
    seen: list[Any] = []
    memory.recall_with(Reranking(None, observe=seen.append), "Ana tea", k=3)
    (window,) = seen
    assert 3 <= len(window.keys) <= WINDOW
    assert window.matrix.shape == (len(window.keys), len(FEATURES))
    assert np.all(np.isfinite(window.matrix))


def test_settings_and_health_name_the_model(tmp_path: Path) -> None:
    off = Memory(tmp_path / "off.db", settings=Settings(embedder="fake", rerank=False))
    with off:
        assert off.health()["ranking"] == {
            "rerank": False,
            "learning": False,
            "model": None,
            "origin": None,
            "base_model": None,
        }
    assert Settings().rerank and Settings.from_env({"SLM_RERANK": "0"}).rerank is False
    on = Memory(tmp_path / "on.db", settings=Settings(embedder="fake"))  # on by default
    with on:
        fill(on)
        state = on.health()["ranking"]
        assert state["rerank"] and state["learning"] and state["origin"] == "default"
        assert state["model"] == default_ranker().id
        traced = on.recall("boiler", trace=True).trace
        assert traced is not None and traced["rerank"]["model"] == default_ranker().id


def test_a_model_file_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    model = fit(synthetic(30, 3))
    path.write_text(model.to_json(), encoding="utf-8")
    settings = Settings.from_env(
        {"SLM_RERANK": "1", "SLM_RERANK_MODEL": str(path)}, embedder="fake"
    )
    with Memory(tmp_path / "m.db", settings=settings) as memory:
        assert memory.health()["ranking"]["model"] == model.id
        assert memory.health()["ranking"]["origin"] == "file"
    path.write_text("{not a model", encoding="utf-8")
    with pytest.raises(ModelError, match="not JSON"):
        Memory(tmp_path / "m.db", settings=settings)


# -- query ids and feedback ----------------------------------------------------------------


def test_every_recall_has_its_own_query_id(memory: Memory) -> None:
    fill(memory)
    first, second = memory.recall("boiler"), memory.recall("boiler")
    assert first.query_id and second.query_id and first.query_id != second.query_id
    assert first.to_dict()["query_id"] == first.query_id


def durability(memory: Memory, lasting: bool | None = None) -> str:
    """The store's commit setting outside any write (``lasting`` None), or inside a write
    transaction of that kind."""
    store: Any = memory.store
    sql = "PRAGMA synchronous" if store.kind == "sqlite" else "SHOW synchronous_commit"
    if lasting is None:
        return str(store.select(sql)[0][0])
    return str(store.change(None, lambda cur: cur.execute(sql).fetchone()[0], lasting=lasting))


def test_only_the_recall_log_commits_without_waiting_for_the_disk(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(memory)
    # The test server already runs without waiting for its disk (tests/postgres_server.py).
    full, relaxed = ("2", "1") if memory.store.kind == "sqlite" else (durability(memory), "off")
    assert (durability(memory), durability(memory, True)) == (full, full)
    assert durability(memory, False) == relaxed
    assert durability(memory) == full  # back as it was for every later write
    store: Any = memory.store
    writes: list[bool] = []
    change = store.change

    def recorded(profile: Any, work: Any, *, lasting: bool = True, **options: Any) -> Any:
        writes.append(lasting)
        return change(profile, work, lasting=lasting, **options)

    monkeypatch.setattr(store, "change", recorded)
    response = memory.recall("Who services the boiler?")
    memory.learning.flush()
    assert writes == [False]  # the log entry, and only it
    memory.feedback(response.results[0].id, useful=True, query_id=response.query_id)
    memory.remember("The boiler was serviced in October 2026")
    assert writes[1:] and all(writes[1:])
    assert durability(memory) == full


def test_feedback_is_stored_listed_and_erased(memory: Memory) -> None:
    fill(memory)
    response = memory.recall("Who services the boiler?")
    top = response.results[0]
    trust = memory.feedback(top.id, useful=True, query_id=response.query_id)
    assert trust > top.trust_score
    memory.feedback(top.id, useful=False)
    events = memory.feedback_events()
    assert [(e.memory_id, e.useful, e.query_id) for e in events] == [
        (top.id, False, None),
        (top.id, True, response.query_id),
    ]
    # A later label on the same recall and memory replaces the earlier one.
    memory.feedback(top.id, useful=False, query_id=response.query_id)
    assert [e.useful for e in memory.feedback_events() if e.query_id] == [False]
    assert memory.reset_feedback() == 2
    assert memory.feedback_events() == []
    assert memory.source_trust("notes") == pytest.approx(0.75)
    with pytest.raises(NotFound, match="no recall with query id"):
        memory.feedback(top.id, useful=True, query_id=response.query_id)


def test_bad_feedback_is_refused_and_changes_nothing(memory: Memory) -> None:
    fill(memory)
    response = memory.recall("boiler")
    good = response.results[0].id
    with pytest.raises(NotFound):
        memory.feedback("0" * 16, useful=True)
    with pytest.raises(NotFound, match="no recall"):
        memory.feedback(good, useful=True, query_id="f" * 32)
    with pytest.raises(InvalidInput, match="query id"):
        memory.feedback(good, useful=True, query_id="not-an-id")
    with pytest.raises(InvalidInput, match="useful"):
        memory.feedback(good, useful="yes")  # type: ignore[arg-type]
    assert memory.feedback_events() == []


def test_feedback_cannot_cross_profiles(store_at: dict[str, Any]) -> None:
    settings = Settings(embedder="fake")
    with Memory(**store_at, profile="a", settings=settings) as a:
        fill(a)
        response = a.recall("boiler")
        with Memory(**store_at, profile="b", settings=settings) as b:
            fill(b)
            theirs = b.recall("boiler")
            with pytest.raises(NotFound):
                b.feedback(response.results[0].id, useful=True)
            with pytest.raises(NotFound, match="no recall"):
                b.feedback(theirs.results[0].id, useful=True, query_id=response.query_id)
            assert b.feedback_events() == []


def test_a_flood_of_feedback_is_kept_whole(tmp_path: Path) -> None:
    settings = Settings(embedder="fake", rerank=True)
    with Memory(tmp_path / "flood.db", settings=settings) as memory:
        fill(memory)
        response = memory.recall("boiler")
        target = response.results[0].id
        for i in range(10_000):
            memory.feedback(target, useful=i % 3 == 0, query_id=response.query_id)
        for _ in range(2_000):
            memory.feedback(target, useful=False)
        events = memory.feedback_events(limit=10_000)
        assert len(events) == 2_001  # one per recall and memory, every general one
        assert memory.recall("boiler").ids  # recall still works
        assert memory.count() == len(NOTES)


def test_feedback_travels_with_an_export(tmp_path: Path) -> None:
    settings = Settings(embedder="fake")
    with Memory(tmp_path / "a.db", settings=settings) as source:
        fill(source)
        response = source.recall("Ana tea")
        source.feedback(response.results[0].id, useful=True, query_id=response.query_id)
        source.feedback(response.results[1].id, useful=False)
        exported = tmp_path / "out.jsonl"
        with open(exported, "w", encoding="utf-8") as handle:
            assert export_jsonl(source, handle) == len(NOTES)
        before = [e.to_dict() for e in source.feedback_events()]
    with Memory(tmp_path / "b.db", settings=settings) as target:
        report = import_jsonl(target, exported)
        assert report.stored == len(NOTES) and report.feedback == 2
        assert [e.to_dict() for e in target.feedback_events()] == before
        assert import_jsonl(target, exported).feedback == 0  # a re-run adds nothing
        # The imported recall can still be named by new feedback.
        target.feedback(response.results[2].id, useful=True, query_id=response.query_id)


# -- a profile's learning ------------------------------------------------------------------


def test_learn_adopts_a_model_only_when_the_shadow_test_passes() -> None:
    base = ranker_from({"position": 1.0})  # the order as it was
    taught = synthetic(60, 4, informative="length")
    model, report = adapt.learn(taught, base)
    assert model is not None and report["adopted"]
    assert report["shadow_mrr_learned"] > report["shadow_mrr_base"] + adapt.MIN_GAIN
    rng = random.Random(5)
    hostile = [
        Example(e.matrix, tuple(rng.randint(0, 1) for _ in e.labels)) for e in synthetic(60, 6)
    ]
    model, report = adapt.learn(hostile, base)
    assert model is None and not report["adopted"]
    few = synthetic(adapt.MIN_QUERIES - 1, 7, informative="length")
    assert adapt.learn(few, base)[0] is None


def test_feedback_refits_the_profile_ranker_and_reset_returns_to_the_default(
    memory: Memory,
) -> None:
    learning = memory.learning
    memory.settings = learning.settings = Settings(embedder="fake", rerank=True)
    learning.base = default_ranker()
    fill(memory)
    words = [note.split() for note in NOTES]
    questions = [" ".join(w[:4]) for w in words] + [" ".join(w[-4:]) for w in words]
    questions += [" ".join(w[2:6]) for w in words]
    assert len(questions) >= adapt.MIN_QUERIES
    for question in questions:
        response = memory.recall(question)
        assert response.results, question
        # The teacher: the last shown memory is the useful one.
        memory.feedback(response.results[-1].id, useful=True, query_id=response.query_id)
        for other in response.results[:-1]:
            memory.feedback(other.id, useful=False, query_id=response.query_id)
    report = learning.state().report
    assert report["queries"] == len(questions) and report["examples"] == len(questions)
    state = memory.health()["ranking"]
    assert state["last_refit"]["queries"] == len(questions)
    if report["adopted"]:
        assert state["origin"] == "profile" and state["model"] == report["model"]
    memory.reset_feedback()
    assert memory.health()["ranking"]["origin"] == "default"
    assert memory.health()["ranking"]["last_refit"] is None


def test_a_damaged_learned_model_falls_back_to_the_default(memory: Memory) -> None:
    memory.settings = memory.learning.settings = Settings(embedder="fake", rerank=True)
    memory.learning.base = default_ranker()
    fill(memory)
    memory.store.set_meta(f"ranker:{memory.profile}", json.dumps({"model": {"format": "x"}}))
    memory.learning._state = None
    assert memory.recall("boiler").ids
    state = memory.health()["ranking"]
    assert state["origin"] == "default" and "unusable" in state["error"]


def test_a_relabelled_recall_counts_once_toward_trust(memory: Memory) -> None:
    fill(memory)
    response = memory.recall("boiler")
    target = response.results[0].id
    for useful in (True, True, False):
        trust = memory.feedback(target, useful=useful, query_id=response.query_id)
    assert trust == pytest.approx((3 + 0) / (4 + 1))  # one label: not useful


def test_recalls_with_any_iterable_of_tags_are_logged(memory: Memory) -> None:
    memory.remember("The boiler is serviced in May", tags=["home"])
    for tags in ({"home"}, (t for t in ["home"]), ["home"]):
        response = memory.recall("boiler", tags=tags)
        assert response.ids
        memory.feedback(response.ids[0], useful=True, query_id=response.query_id)


def test_an_import_refuses_a_malformed_recall_request(tmp_path: Path) -> None:
    line = {
        "feedback": {
            "memory_id": "0" * 16,
            "useful": True,
            "query_id": "a" * 32,
            "at": "2026-01-01T00:00:00Z",
            "request": {"query": "boiler", "mystery": 1},
        }
    }
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    with Memory(tmp_path / "m.db", settings=Settings(embedder="fake")) as memory:
        with pytest.raises(InvalidInput, match="recall request"):
            import_jsonl(memory, path)
        assert memory.feedback_events() == []
