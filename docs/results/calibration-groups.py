"""Held-out calibration figures by group for docs/calibration.md ("Measured").

    python docs/results/calibration-groups.py DB LABELS WINDOWS > calibration-groups.json

DB and LABELS come from `slm calibrate locomo --data locomo-dev.json --db DB --labels-out
LABELS`; WINDOWS is the cache directory of `slm bench learning --cache WINDOWS` (the windows
the shipped ranker is trained on). Two measurements:

- "shipped ranker": leave one conversation out, every recall ranked by the shipped ranker,
  which was trained on every dev conversation, the held-out one too;
- "ranker held out": for each held-out set (the split of each seed 0-4, then each
  conversation alone), a ranker trained as the shipped one is (both dev files, one anchor
  each) but without the held-out conversations; every label is asked under it, the
  calibration is fitted on the other conversations (which that ranker saw, as the shipped
  ranker saw all of dev) and measured on the held-out ones (which it never saw). This is
  what a calibration fitted on dev meets on conversations the ranker never saw;
- "fitted on recalls the ranker never saw either": each conversation held out as above,
  the calibration fitted on the other conversations' recalls each ranked by the ranker
  trained without that conversation (from the previous part).

With ``SLM_RERANK=0`` the first part gives the figures without a reranker.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from slm.calibrate.artefact import BINS
from slm.embed import make_embedder
from slm.engine import Memory
from slm.settings import Settings
from slm_bench import learning, learning_data
from slm_fit import labelled, metrics
from slm_fit.calibration import RISKS, Observation, arrays, fit_model, split

FILES = ("locomo-dev", "beam-dev")


def figures(p: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    s = metrics.summary(p, y, BINS, RISKS)
    keys = ("n", "hit_rate", "mean_probability", "ece", "brier", "aurc", "auroc")
    return {key: s[key] for key in keys} | {"coverage_at_risk_0.1": s["coverage_at_risk"]["0.1"]}


def chance(p: np.ndarray, draws: int = 2000) -> dict[str, float]:
    """The ECE a perfectly calibrated model would measure on these recalls by chance alone:
    outcomes drawn from ``p`` itself, median and 95th percentile."""
    rng = np.random.default_rng(0)
    values = [
        metrics.ece(p, (rng.uniform(size=len(p)) < p).astype(float), BINS) for _ in range(draws)
    ]
    return {
        "median": round(float(np.median(values)), 4),
        "p95": round(float(np.percentile(values, 95)), 4),
    }


def held_out(observations: list[Observation], held: set[str]) -> dict[str, Any]:
    """Fit on the groups not in ``held``, measure on ``held``."""
    return measured(
        [o for o in observations if o.group not in held],
        [o for o in observations if o.group in held],
        held,
    )


def measured(fit: list[Observation], test: list[Observation], held: set[str]) -> dict[str, Any]:
    """A calibration fitted on ``fit``, measured on ``test``: all of it, and its answerable
    questions apart."""
    matrix, y = arrays(fit)
    model = fit_model(matrix, y, [o.group for o in fit], "platt")
    matrix, y = arrays(test)
    p = model.probability(matrix)
    answerable = np.asarray([o.answerable for o in test])
    return {
        "heldout": sorted(held),
        "all": figures(p, y),
        "ece_by_chance": chance(p),
        "answerable": figures(p[answerable], y[answerable]),
    }


def main(db: str, labels_file: str, windows: str) -> dict[str, Any]:
    labels, _ = labelled.read_labels([labels_file], "default")
    settings = replace(Settings.from_env(), calibration=None)
    embedder = make_embedder(settings.embedder)

    def observe(chosen: Settings) -> list[Observation]:
        def opener(profile: str) -> Memory:
            return Memory(db, profile=profile, settings=chosen, embedder=embedder)

        return labelled.observe(labels, opener, 10)[0]

    groups = sorted({label.group for label in labels})
    shipped = observe(settings)
    out: dict[str, Any] = {"shipped ranker": [held_out(shipped, {g}) for g in groups]}
    seen = {name: learning_data.load(Path(windows) / f"{name}.windows.npz") for name in FILES}
    sets = [set(split([label.group for label in labels], seed, 0.5)[1]) for seed in range(5)]
    sets += [{g} for g in groups]
    rows: list[dict[str, Any]] = []
    cached: dict[str, tuple[str, list[Observation]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for held in sets:
            key = ",".join(sorted(held))
            if key not in cached:
                without = {n: [s for s in w if s.group not in held] for n, w in seen.items()}
                model = learning.train_joint(without, f"all - {key}")
                path = Path(tmp) / f"{len(cached)}.json"
                path.write_text(model.to_json(), encoding="utf-8")
                chosen = replace(settings, rerank=True, rerank_model=str(path))
                cached[key] = (model.id, observe(chosen))
            model_id, observations = cached[key]
            rows.append({"ranker": model_id, **held_out(observations, held)})
    out["ranker held out"] = rows
    alone = {g: [o for o in cached[g][1] if o.group == g] for g in groups}
    out["fitted on recalls the ranker never saw either"] = [
        measured([o for h in groups if h != g for o in alone[h]], alone[g], {g}) for g in groups
    ]
    return out


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4]), indent=1))
