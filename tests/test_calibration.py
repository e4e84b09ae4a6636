"""The calibration release gate (docs/calibration.md): metrics, the split, the fit and its
gate, the artefact's identity checks, and what a loaded artefact changes in a recall."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_learning import NOTES

from slm import Memory, Settings
from slm.calibrate.artefact import MAX_ECE, MIN_HELDOUT, content_id, fingerprint
from slm.contract import SELECTIVE_RISK, SIGNALS
from slm.errors import CalibrationError, InvalidInput
from slm.learn.model import default_ranker
from slm_fit import metrics
from slm_fit.calibration import Observation, calibrate, split
from slm_fit.labelled import observe, read_labels

DECLARED = {"corpus": "synthetic", "queries": "synthetic"}


def synthetic(groups: int, per_group: int, seed: int = 0) -> list[Observation]:
    """Recalls whose chance of a hit rises with the first signal, as a logistic curve."""
    rng = np.random.default_rng(seed)
    out = []
    for g in range(groups):
        for _ in range(per_group):
            values = rng.uniform(0, 1, len(SIGNALS))
            hit = rng.uniform() < 1 / (1 + np.exp(-12 * (values[0] - 0.5)))
            out.append(Observation(f"g{g}", tuple(float(v) for v in values), bool(hit)))
    return out


def artefact_for(memory: Memory, k: int = 5, **options: Any) -> dict[str, Any]:
    outcome = calibrate(
        synthetic(40, 60),
        k=k,
        fingerprint=memory.fingerprint(),
        distribution=DECLARED,
        **options,
    )
    assert outcome.artefact is not None, outcome.failures
    return outcome.artefact


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def rehashed(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with an id that matches it again (an edit made to look untouched)."""
    return {**data, "calibration_id": content_id(data)}


# -- metrics ------------------------------------------------------------------------------


def test_metrics_on_hand_checked_cases() -> None:
    p = np.array([0.9, 0.8, 0.3, 0.2])
    y = np.array([1.0, 0.0, 1.0, 0.0])
    # bins: 0.9 -> [0.867,0.933) y=1; 0.8 -> [0.8,0.867) y=0; 0.3 -> y=1; 0.2 -> y=0
    assert metrics.ece(p, y, 15) == pytest.approx((0.1 + 0.8 + 0.7 + 0.2) / 4)
    assert metrics.brier(p, y) == pytest.approx((0.01 + 0.64 + 0.49 + 0.04) / 4)
    # most confident first: risks 0, 1/2, 1/3, 2/4
    assert metrics.aurc(p, y) == pytest.approx((0 + 0.5 + 1 / 3 + 0.5) / 4)
    assert metrics.coverage_at_risk(p, y, 0.1) == 0.25
    assert metrics.coverage_at_risk(p, y, 0.5) == 1.0
    assert metrics.threshold_for_risk(p, y, 0.1) == 0.9
    assert metrics.threshold_for_risk(np.array([0.5]), np.array([0.0]), 0.1) is None
    assert metrics.auroc(p, y) == pytest.approx(0.75)


def test_a_perfect_ranking_has_the_least_aurc_and_calibrated_draws_a_small_ece() -> None:
    rng = np.random.default_rng(1)
    p = rng.uniform(0, 1, 20_000)
    y = (rng.uniform(0, 1, 20_000) < p).astype(float)
    assert metrics.ece(p, y, 15) < 0.02
    ordered = np.sort(y)[::-1]
    assert metrics.aurc(np.linspace(1, 0, len(y)), ordered) < metrics.aurc(p, y)


# -- split and fit ------------------------------------------------------------------------


def test_the_split_is_by_group_seeded_and_keeps_both_sides() -> None:
    groups = [f"g{i % 7}" for i in range(700)]
    fit_part, held = split(groups, seed=3, heldout=0.5)
    assert set(fit_part).isdisjoint(held) and set(fit_part) | set(held) == set(groups)
    assert abs(sum(g in held for g in groups) - 350) <= 50  # the nearest count of whole groups
    assert split(groups, seed=3, heldout=0.5) == (fit_part, held)
    assert split(groups, seed=4, heldout=0.5) != (fit_part, held)
    with pytest.raises(CalibrationError, match="at least two"):
        split(["one"] * 50, seed=0, heldout=0.5)


def test_a_fit_on_enough_labels_passes_the_gate_with_a_stable_identity() -> None:
    running = {"release": "x"}
    first = calibrate(synthetic(20, 60), k=10, fingerprint=running, distribution=DECLARED)
    assert first.failures == [] and first.artefact is not None
    held = first.report["heldout"]
    assert held["n"] >= MIN_HELDOUT and held["ece"] <= MAX_ECE
    assert first.artefact["calibration_id"] == content_id(first.artefact)
    again = calibrate(synthetic(20, 60), k=10, fingerprint=running, distribution=DECLARED)
    assert again.artefact is not None
    assert again.artefact["calibration_id"] == first.artefact["calibration_id"]
    isotonic = calibrate(
        synthetic(40, 60), k=10, fingerprint=running, distribution=DECLARED, method="isotonic"
    )
    assert isotonic.artefact is not None and isotonic.artefact["model"]["isotonic"]


def test_the_gate_refuses_a_small_held_out_part_and_says_so() -> None:
    outcome = calibrate(synthetic(4, 40), k=10, fingerprint={}, distribution=DECLARED)
    assert outcome.artefact is None
    assert any(f"needs {MIN_HELDOUT}" in failure for failure in outcome.failures)
    assert outcome.report["passed"] is False and outcome.report["heldout"]["n"] < MIN_HELDOUT


def test_the_gate_refuses_a_miscalibrated_held_out_part() -> None:
    # The held-out groups behave unlike the fit groups: hits there are rare whatever the
    # signals say, so the fitted probabilities are far too high.
    observations = synthetic(20, 60)
    _, held = split([o.group for o in observations], 0, 0.5)
    shifted = [
        replace(o, hit=False) if o.group in held and o.hit and i % 3 else o
        for i, o in enumerate(observations)
    ]
    outcome = calibrate(shifted, k=10, fingerprint={}, distribution=DECLARED, max_risk=0.1)
    assert outcome.artefact is None
    assert any("ECE" in failure for failure in outcome.failures)
    # The threshold met the target on the fit part; held out it does not, and that fails too.
    assert any("held-out risk" in failure for failure in outcome.failures)


@pytest.mark.parametrize(
    ("observations", "message"),
    [
        ([], "no labelled recalls"),
        ([Observation("a", (float("nan"),) * len(SIGNALS), True)] * 3, "not finite"),
        ([Observation("a", (0.0,) * 3, True)] * 3, f"needs {len(SIGNALS)} signals"),
        (
            [replace(o, hit=True) for o in synthetic(4, 20)],
            "at least two of each",
        ),
    ],
)
def test_unusable_observations_are_refused(observations: list[Observation], message: str) -> None:
    with pytest.raises(CalibrationError, match=message):
        calibrate(observations, k=10, fingerprint={}, distribution=DECLARED)


def test_options_are_checked_and_one_fit_group_is_enough_for_isotonic() -> None:
    for options, message in (
        ({"seed": -1}, "seed"),
        ({"heldout": 1.0}, "held-out share"),
        ({"method": "magic"}, "unknown method"),
        ({"max_risk": 0.0}, "risk target"),
    ):
        with pytest.raises(CalibrationError, match=message):
            calibrate(synthetic(4, 20), k=10, fingerprint={}, distribution=DECLARED, **options)
    two = calibrate(
        synthetic(2, 600), k=10, fingerprint={}, distribution=DECLARED, method="isotonic"
    )
    assert two.report["distribution"]["split"]["fit_groups"] == ["g0"] or two.report[
        "distribution"
    ]["split"]["fit_groups"] == ["g1"]


def test_questions_asked_across_the_split_are_counted() -> None:
    observations = synthetic(20, 60)
    fit_groups, held = split([o.group for o in observations], 0, 0.5)
    crossing = [
        replace(o, origin=held[0], answerable=False, hit=False)
        for o in observations
        if o.group == fit_groups[0]
    ][:10]
    same_side = [replace(o, origin=fit_groups[1]) for o in crossing]
    outcome = calibrate(
        [*observations, *crossing, *same_side], k=10, fingerprint={}, distribution=DECLARED
    )
    assert outcome.report["distribution"]["split"]["asked_across_split"] == 10
    answerable = outcome.report["heldout_answerable"]["n"]
    assert answerable == outcome.report["heldout"]["n"]  # all the crossing ones are fitted on


def test_aurc_does_not_depend_on_the_order_of_ties() -> None:
    p = np.full(4, 0.5)
    assert metrics.aurc(p, np.array([1.0, 1, 0, 0])) == metrics.aurc(p, np.array([0.0, 0, 1, 1]))


def test_the_release_is_the_distributions_version() -> None:
    import tomllib

    from slm.release import VERSION

    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["version"] == VERSION


def test_a_risk_target_sets_a_threshold_from_the_fit_part() -> None:
    outcome = calibrate(
        synthetic(20, 60), k=10, fingerprint={}, distribution=DECLARED, max_risk=0.1
    )
    assert outcome.artefact is not None
    abstain = outcome.report["abstention"]
    assert 0 < abstain["threshold"] < 1
    assert abstain["heldout"]["risk"] <= abstain["heldout"]["risk_allowed"]
    p, _ = outcome.parts["heldout"]
    answered = p >= abstain["threshold"]
    assert abstain["heldout"]["coverage"] == round(float(answered.mean()), 4)


# -- the artefact in a running memory -----------------------------------------------------


def filled(memory: Memory) -> Memory:
    memory.remember_many([{"content": text, "source": "notes"} for text in NOTES])
    return memory


def test_no_artefact_changes_nothing(memory: Memory) -> None:
    out = filled(memory).recall("When is the boiler serviced?", k=5).to_dict()
    assert out["calibration_status"] == "uncalibrated"
    assert out["calibration_id"] is None and out["answer_confidence"] is None
    assert memory.health()["calibration"] == {"status": "uncalibrated"}


def test_a_matching_artefact_gives_the_calibrated_probability(
    memory: Memory, tmp_path: Path
) -> None:
    data = artefact_for(filled(memory))
    memory.use_calibration(write(tmp_path / "calib.json", data))
    response = memory.recall("When is the boiler serviced?", k=5, trace=True)
    out = response.to_dict()
    assert out["calibration_status"] == "calibrated"
    assert out["calibration_id"] == data["calibration_id"]
    assert response.signals is not None and memory.calibration is not None
    expected = memory.calibration.model.probability(np.asarray([response.signals.values]))[0]
    assert out["answer_confidence"] == pytest.approx(expected, abs=1e-6)
    assert out["trace"]["calibration"]["applied"] is True
    assert set(out["trace"]["calibration"]["signals"]) == set(SIGNALS)
    assert memory.health()["calibration"]["calibration_id"] == data["calibration_id"]
    # Another k, or a recall restricted to some channels, is not what was calibrated.
    other = memory.recall("When is the boiler serviced?", k=3, trace=True).to_dict()
    assert other["calibration_status"] == "uncalibrated" and other["answer_confidence"] is None
    assert "k=5" in other["trace"]["calibration"]["reason"]
    narrow = memory.recall("When is the boiler serviced?", k=5, channels=["bm25"]).to_dict()
    assert narrow["answer_confidence"] is None
    # Nor one that leaves results out: the probability is about the top k as ranked.
    floored = memory.recall("When is the boiler serviced?", k=5, min_relevance=0.0, trace=True)
    assert floored.answer_confidence is None and floored.trace is not None
    assert "min_relevance" in floored.trace["calibration"]["reason"]
    memory.use_calibration(None)
    assert memory.recall("boiler", k=5).to_dict()["calibration_status"] == "uncalibrated"


def test_below_the_risk_threshold_a_recall_abstains_and_keeps_its_results(
    memory: Memory, tmp_path: Path
) -> None:
    data = artefact_for(filled(memory), max_risk=0.1)
    # The recall's probability sits below this threshold: abstain, results kept.
    data["abstention"]["threshold"] = 0.999999
    memory.use_calibration(write(tmp_path / "calib.json", rehashed(data)))
    out = memory.recall("When is the boiler serviced?", k=5).to_dict()
    assert out["answer_confidence"] < 0.999999
    assert out["abstained"] is True and out["abstention_reason"] == SELECTIVE_RISK
    assert out["results"]


def test_an_artefact_from_the_settings_loads_when_the_memory_opens(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with Memory(path, settings=Settings(embedder="fake")) as memory:
        artefact = write(tmp_path / "calib.json", artefact_for(filled(memory)))
    settings = Settings(embedder="fake", calibration=str(artefact))
    with Memory(path, settings=settings) as memory:
        assert memory.recall("boiler", k=5).to_dict()["calibration_status"] == "calibrated"
    # Other weights are another configuration: refused when the store opens.
    other = replace(settings, weights={"bm25": 0.1})
    with pytest.raises(CalibrationError, match=r"channels\.bm25"):
        Memory(path, settings=other)
    with Memory(path, settings=Settings(embedder="fake", rrf_k=60)) as memory:
        with pytest.raises(CalibrationError, match="rrf_k"):
            memory.use_calibration(artefact)
        assert memory.recall("boiler", k=5).to_dict()["calibration_status"] == "uncalibrated"


def test_an_artefact_is_refused_under_another_ranking(tmp_path: Path) -> None:
    # Each of these recalls ranks the same candidates in another order than the artefact's
    # recalls did, so its probability would describe other top k results.
    path = tmp_path / "store.db"
    with Memory(path, settings=Settings(embedder="fake")) as memory:
        reranked = write(tmp_path / "reranked.json", artefact_for(filled(memory)))
    with Memory(path, settings=Settings(embedder="fake", rerank=False)) as memory:
        plain = write(tmp_path / "plain.json", artefact_for(memory))
    shipped = default_ranker()
    reversed_model = tmp_path / "reversed.json"
    reversed_model.write_text(replace(shipped, weights=-shipped.weights).to_json())
    looser = tmp_path / "looser.json"
    looser.write_text(replace(shipped, shift_limit=2.0).to_json())
    off, on = Settings(embedder="fake", rerank=False), Settings(embedder="fake")
    refused = [
        (off, reranked, f"ranker: artefact '{shipped.id}', running None"),
        (on, plain, f"ranker: artefact None, running '{shipped.id}'"),
        (Settings(embedder="fake", rerank_model=str(reversed_model)), reranked, "ranker"),
        (Settings(embedder="fake", rerank_model=str(looser)), reranked, "ranker"),
    ]
    for settings, artefact, message in refused:
        with pytest.raises(CalibrationError, match=re.escape(message)):
            Memory(path, settings=replace(settings, calibration=str(artefact)))
    # The same ranking loads, whichever file holds the same model.
    same = tmp_path / "same.json"
    same.write_text(shipped.to_json())
    for settings, artefact in (
        (Settings(embedder="fake", rerank_model=str(same)), reranked),
        (Settings(embedder="fake", rerank=False), plain),
    ):
        with Memory(path, settings=replace(settings, calibration=str(artefact))) as memory:
            assert memory.recall("boiler", k=5).answer_confidence is not None


def test_a_recall_ranked_by_the_profiles_own_model_stays_uncalibrated(
    memory: Memory, tmp_path: Path
) -> None:
    memory.use_calibration(write(tmp_path / "calib.json", artefact_for(filled(memory))))
    assert memory.recall("boiler", k=5).answer_confidence is not None
    # The profile's feedback trained a model of its own, which now ranks its recalls.
    shipped = default_ranker()
    learned = replace(shipped, weights=-shipped.weights)
    memory.store.set_meta(
        f"ranker:{memory.profile}", json.dumps({"model": learned.to_data(), "report": {}})
    )
    memory.learning._state = None
    out = memory.recall("boiler", k=5, trace=True)
    assert out.answer_confidence is None and out.calibration_id is None
    assert out.trace is not None and out.trace["rerank"]["model"] == learned.id
    assert f"reranked by {learned.id}" in out.trace["calibration"]["reason"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: {**d, "k": 7}, "changed after it was written"),
        (
            lambda d: rehashed({**d, "fingerprint": {**d["fingerprint"], "release": "0.0.1"}}),
            "fitted for slm 0.0.1",
        ),
        (
            lambda d: rehashed({**d, "heldout": {**d["heldout"], "n": 120}}),
            "did not pass the release gate",
        ),
        (
            lambda d: rehashed({**d, "model": {**d["model"], "weights": [1.0]}}),
            "model.weights has 1 numbers",
        ),
        (lambda d: {"format": "something else"}, "not a calibration artefact"),
        (lambda d: rehashed({**d, "heldout": {**d["heldout"], "ece": False}}), "release gate"),
        (lambda d: rehashed({**d, "model": {**d["model"], "bias": 10**400}}), "model.bias"),
    ],
)
def test_a_bad_artefact_is_refused_and_recall_stays_uncalibrated(
    tmp_path: Path, edit: Any, message: str
) -> None:
    with Memory(tmp_path / "store.db", settings=Settings(embedder="fake")) as memory:
        data = artefact_for(filled(memory))
        with pytest.raises(CalibrationError, match=message):
            memory.use_calibration(write(tmp_path / "bad.json", edit(data)))
        out = memory.recall("boiler", k=5).to_dict()
        assert out["calibration_status"] == "uncalibrated" and out["answer_confidence"] is None
        (tmp_path / "text.json").write_text("{not json", encoding="utf-8")
        with pytest.raises(CalibrationError, match="cannot read"):
            memory.use_calibration(tmp_path / "text.json")


def test_the_fingerprint_covers_every_setting_that_changes_a_recall() -> None:
    from dataclasses import fields

    from slm.calibrate.artefact import IGNORED_SETTINGS, RETRIEVAL_SETTINGS

    named = set(RETRIEVAL_SETTINGS) | set(IGNORED_SETTINGS)
    assert {f.name for f in fields(Settings)} == named
    from slm.channels import build_channels

    settings = Settings(embedder="fake")
    channels = build_channels(settings)
    base = fingerprint(settings, channels, "fake", None, "sqlite")
    assert fingerprint(replace(settings, bm25_b=0.5), channels, "fake", None, "sqlite") != base
    assert fingerprint(settings.with_channels(("bm25",)), channels, "fake", None, "sqlite") != base
    assert fingerprint(settings, channels, "fake", "ranker-1", "sqlite") != base
    assert fingerprint(settings, channels, "fake", None, "postgres") != base
    assert fingerprint(settings, channels, "fake", None, "sqlite", "reader-1") != base


# -- labels -------------------------------------------------------------------------------


def labels_file(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "".join((json.dumps(line) if not isinstance(line, str) else line) + "\n" for line in lines),
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{oops", "not JSON"),
        ({"query": "q", "evidence": "abc"}, "'evidence' must be a list"),
        ({"query": "q", "evidence": [], "evidense": []}, "unknown key"),
        ({"query": "", "evidence": []}, "query"),
        ({"query": "q", "evidence": ["not-an-id"]}, "16 lowercase hex"),
        ({"query": "q", "evidence": [], "now": "yesterday-ish"}, "now"),
        ({"query": "q", "evidence": [], "group": ""}, "group"),
    ],
)
def test_malformed_labels_are_refused_with_their_place(
    tmp_path: Path, line: Any, message: str
) -> None:
    path = labels_file(tmp_path / "labels.jsonl", [{"query": "fine", "evidence": []}, line])
    with pytest.raises(InvalidInput, match=message) as error:
        read_labels([path], "default")
    assert "labels.jsonl:2" in str(error.value)


def test_empty_labels_and_unknown_ids_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no label"):
        read_labels([labels_file(tmp_path / "empty.jsonl", [])], "default")
    with Memory(tmp_path / "store.db", settings=Settings(embedder="fake")) as memory:
        filled(memory)
    labels, _ = read_labels(
        [
            labels_file(
                tmp_path / "l.jsonl",
                [{"query": "boiler", "evidence": ["0123456789abcdef"], "profile": "default"}],
            )
        ],
        "default",
    )
    settings = Settings(embedder="fake")

    def opener(profile: str) -> Memory:
        return Memory(tmp_path / "store.db", profile=profile, settings=settings)

    with pytest.raises(InvalidInput, match="0123456789abcdef are not memories"):
        observe(labels, opener, 10)
    empty, _ = read_labels(
        [labels_file(tmp_path / "e.jsonl", [{"query": "x", "evidence": [], "profile": "other"}])],
        "default",
    )
    with pytest.raises(InvalidInput, match="holds no memories"):
        observe(empty, opener, 10)


# -- end to end: the command, the server ---------------------------------------------------


def labelled_store(tmp_path: Path, count: int) -> tuple[Path, Path]:
    """A store of NOTES and ``count`` labels over it in ten groups: half ask for a note in
    its own words (its evidence), half ask about things the store never mentions."""
    db = tmp_path / "labelled.db"
    with Memory(db, settings=Settings(embedder="fake")) as memory:
        by_text = {r.content: r.id for r in memory.remember_many([{"content": t} for t in NOTES])}
    lines = []
    for i in range(count):
        if i % 2:
            note = NOTES[i % len(NOTES)]
            lines.append({"query": note, "evidence": [by_text[note]], "group": f"g{i % 10}"})
        else:
            lines.append(
                {"query": f"xylophone{i} quasar{i}", "evidence": [], "group": f"g{i % 10}"}
            )
    return db, labels_file(tmp_path / "labels.jsonl", lines)


def test_the_command_writes_an_artefact_only_past_the_gate(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from slm.cli import cli

    env = {"SLM_EMBEDDER": "fake"}
    runner = CliRunner()
    db, labels = labelled_store(tmp_path, 1040)
    out, plots = tmp_path / "calib.json", tmp_path / "plots"
    done = runner.invoke(
        cli,
        ["--db", str(db), "calibrate", "--labels", str(labels), "--out", str(out),
         "--max-risk", "0.1", "--plots", str(plots), "--quiet"],
        env=env,
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "gate (held-out n >= 500, ECE <= 0.05): passed" in done.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["distribution"]["labels"]["count"] == 1040
    assert data["distribution"]["split"]["heldout_groups"]
    assert {p.name for p in plots.iterdir()} == {
        "calib-reliability.png",
        "calib-risk-coverage.png",
    }
    recalled = runner.invoke(
        cli,
        ["--db", str(db), "--calibration", str(out), "recall", NOTES[0], "--json"],
        env=env,
    )
    assert recalled.exit_code == 0, recalled.output
    answer = json.loads(recalled.output)
    assert answer["calibration_id"] == data["calibration_id"]
    assert 0 <= answer["answer_confidence"] <= 1
    for command in ("health", "trace"):
        args = [command] if command == "health" else [command, NOTES[0]]
        shown = runner.invoke(cli, ["--db", str(db), "--calibration", str(out), *args], env=env)
        assert shown.exit_code == 0 and data["calibration_id"] in shown.output, shown.output
    evaluated = runner.invoke(
        cli,
        ["--db", str(db), "calibrate", "evaluate", "--calibration", str(out),
         "--labels", str(labels), "--json", "--quiet"],
        env=env,
    )  # fmt: skip
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(evaluated.output)["n"] == 1040
    # Too few labels: the gate says why, and nothing is written.
    small = tmp_path / "small.jsonl"
    labels_file(small, labels.read_text(encoding="utf-8").splitlines()[:200])
    refused = runner.invoke(
        cli,
        ["--db", str(db), "calibrate", "--labels", str(small), "--out", str(tmp_path / "no.json")],
        env=env,
    )  # fmt: skip
    assert refused.exit_code == 1
    assert "needs 500" in refused.output and "no artefact was written" in refused.output
    assert not (tmp_path / "no.json").exists()
    # An edited artefact stops the command that would use it, with the reason.
    edited = {**data, "k": 3}
    bad = write(tmp_path / "edited.json", edited)
    stopped = runner.invoke(
        cli, ["--db", str(db), "--calibration", str(bad), "recall", "boiler"], env=env
    )
    assert stopped.exit_code == 1 and "changed after it was written" in stopped.output
    # A stale artefact never stops a write.
    wrote = runner.invoke(
        cli, ["--db", str(db), "remember", "A note"], env={**env, "SLM_CALIBRATION": str(bad)}
    )
    assert wrote.exit_code == 0, wrote.output
    # Options of the fit go after the subcommand; --labels-out needs a store that is kept.
    early = runner.invoke(cli, ["calibrate", "--k", "5", "locomo", "--data", str(labels)], env=env)
    assert early.exit_code == 2 and "--k" in early.output
    kept = runner.invoke(
        cli,
        ["calibrate", "locomo", "--data", str(labels), "--labels-out", str(tmp_path / "l")],
        env=env,
    )
    assert kept.exit_code == 2 and "--db" in kept.output


def test_the_rest_api_reports_the_calibrated_probability(tmp_path: Path) -> None:
    import httpx
    from test_http import run_server

    with Memory(tmp_path / "api.db", settings=Settings(embedder="fake")) as memory:
        artefact = write(tmp_path / "calib.json", artefact_for(filled(memory)))
    server = run_server(tmp_path, SLM_CALIBRATION=str(artefact))
    url = next(server)
    try:
        body = httpx.post(f"{url}/v1/recall", json={"query": "boiler", "k": 5}).json()
        assert body["calibration_status"] == "calibrated"
        assert isinstance(body["answer_confidence"], float)
        other = httpx.post(f"{url}/v1/recall", json={"query": "boiler", "k": 10}).json()
        assert other["calibration_status"] == "uncalibrated" and other["answer_confidence"] is None
    finally:
        server.close()
