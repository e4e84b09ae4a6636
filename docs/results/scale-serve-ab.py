"""One scale store built once, served cold by several versions of slm (docs/benchmarks.md).

`slm bench scale` builds a store and serves it in one run; to compare two versions' serving
on the very same store (at 1M the build takes an hour), this drives its two steps apart:

    PYTHONPATH=OLD/src python docs/results/scale-serve-ab.py build DIR 1000000
    PYTHONPATH=OLD/src python docs/results/scale-serve-ab.py serve DIR old.json
    PYTHONPATH=NEW/src python docs/results/scale-serve-ab.py serve DIR new.json

build: the bench's bulk load (seed 0) with the code on PYTHONPATH; keeps the store and the
questions (DIR/queries.json). serve: evicts the store's pages from the cache (as --cold),
runs the bench's serving step in a new process, writes its report. A newer version
migrates the store when it opens it: serve the older one first.
"""

import json
import sys
import time
from datetime import datetime
from pathlib import Path

from slm.embed import make_embedder
from slm.settings import Settings
from slm_bench import scale, synth


def say(line: str) -> None:
    print(time.strftime("%H:%M:%S"), line, file=sys.stderr, flush=True)


def build(folder: Path, n: int, settings: Settings) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    gen = synth.Synth(n, 0, queries=200 + scale.WARMUP, warmup=scale.WARMUP)
    db = folder / scale.STORE_NAME
    report, asked = scale._bulk(
        gen, db, settings, make_embedder(settings.embedder), False, None, say
    )
    report["disk_bytes"] = scale.store_bytes(db)
    (folder / "bulk.json").write_text(json.dumps(report, indent=1))
    questions = [
        {"text": q.text, "target": q.target, "now": q.now.isoformat() if q.now else None,
         "kind": q.kind, "warmup": q.warmup}
        for q in asked
    ]  # fmt: skip
    (folder / "queries.json").write_text(json.dumps(questions))
    say(f"built: {report}")


def serve(folder: Path, out: Path, settings: Settings) -> None:
    asked = [
        synth.SynthQuery(**{**q, "now": datetime.fromisoformat(q["now"]) if q["now"] else None})
        for q in json.loads((folder / "queries.json").read_text())
    ]
    db = folder / scale.STORE_NAME
    evicted = scale.evict_page_cache(db)
    report = {**scale.serve_in_subprocess(db, settings, asked), "evicted": evicted}
    out.write_text(json.dumps(report, indent=1))
    shown = ("open_to_first_recall_s", "latency_ms", "hit@1", "hit@10", "peak_rss_mb")
    print({key: report.get(key) for key in shown})


if __name__ == "__main__":
    mode, where = sys.argv[1], Path(sys.argv[2])
    chosen = Settings.from_env(calibration=None)
    if mode == "build":
        build(where, int(sys.argv[3]), chosen)
    else:
        serve(where, Path(sys.argv[3]), chosen)
