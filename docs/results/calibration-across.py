"""Cross-file and per-file calibration figures for docs/benchmarks.md, from the stores and labels
that `slm calibrate locomo/retrieval --db /tmp/cal/dev.db --labels-out ...` built and the
artefacts the commands there wrote to /tmp/cal (run from the repository root)."""
import json, sys
import numpy as np
from pathlib import Path
from slm import Memory, Settings
from slm_fit import metrics
from slm.calibrate.artefact import Calibration, BINS
from slm_fit.calibration import RISKS, fit_model
from slm.embed import make_embedder
from slm_fit.labelled import observe, read_labels, evaluate

db = Path("/tmp/cal/dev.db")
settings = Settings.from_env()
emb = make_embedder(settings.embedder)
opener = lambda p: Memory(db, profile=p, settings=settings, embedder=emb)
def obs(path, keep=lambda l: True):
    labels, _ = read_labels([path], "default")
    labels = [l for l in labels if keep(l)]
    return observe(labels, opener, 10)[0]
out = {}
loc = obs("/tmp/cal/locomo.jsonl"); beam = obs("/tmp/cal/beam.jsonl")
own = lambda o: True
# BEAM-fitted (all of BEAM; the gate refuses it) applied to LoCoMo
m = np.asarray([o.signals for o in beam]); y = np.asarray([float(o.hit) for o in beam])
model = fit_model(m, y, [o.group for o in beam], "platt")
lm = np.asarray([o.signals for o in loc]); ly = np.asarray([float(o.hit) for o in loc])
out["beam_fit_on_locomo"] = metrics.summary(model.probability(lm), ly, BINS, RISKS)
out["beam_fit_on_locomo"].pop("reliability")
fp = opener("locomo-conv-26").__enter__().fingerprint()
for name in ("locomo", "pooled"):
    cal = Calibration.load(f"/tmp/cal/calibration-{name}.json", fp)
    held = set(cal.data["distribution"]["split"]["heldout_groups"])
    for part, data in (("locomo", loc), ("beam", beam)):
        h = [o for o in data if o.group in held]
        if not h: continue
        r, _ = evaluate(cal, h); r.pop("reliability")
        out[f"{name}_artefact_heldout_{part}"] = r
    # answerable-only, held-out conversations
labels, _ = read_labels(["/tmp/cal/locomo.jsonl"], "default")
cal = Calibration.load("/tmp/cal/calibration-locomo.json", fp)
held = set(cal.data["distribution"]["split"]["heldout_groups"])
ownq = [l for l in labels if l.group in held and l.evidence]
r, _ = evaluate(cal, observe(ownq, opener, 10)[0]); r.pop("reliability")
out["locomo_artefact_heldout_answerable_only"] = r
print(json.dumps(out, indent=1))
