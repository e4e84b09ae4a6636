"""The scale and latency benchmark (protocol: BENCHMARK.md section 2; corpus: ``synth``).

One run, for N synthetic memories:

1. Bulk load. The generator's memories go into a fresh SQLite store through
   ``remember_many`` in batches of 5,000, their vectors given (:class:`Precomputed`):
   composed from the real model's token vectors (:func:`compose`; the table is embedded
   once and cached as ``.npy``, see :func:`token_table`), or with ``real_vectors`` the
   real model's vectors of each memory, computed before the clock starts. Only the
   ``remember_many`` calls are timed: ``ingest_per_s_precomputed`` (``generate_s`` is the
   untimed rest of the loop: generating memories and their vectors).
   ``peak_rss_ingest_mb`` is this process's peak RSS afterwards. The store is closed and
   ``disk_bytes_per_memory`` counts every file next to it whose name starts with the
   store's stem (database, WAL, shared memory, indexes).
2. Serving, in a fresh Python process so its RSS is its own (with ``cold``, the store's
   files are first dropped from the page cache, ``page_cache``): the clock starts before
   ``Memory(...)`` and stops when the first query's recall returns
   (``open_to_first_recall_s``; model and index loading included). The rest of the 20
   warm-up queries follow, then every timed query once, each timed around
   ``Memory.recall(q, k=10, now=...)`` alone (``latency_ms``); the same results give
   ``hit@1``, ``hit@10`` (the target memory among the top 1 / 10) and ``abstained``. Then
   20 of them again with ``trace=True``: which channels ran, how many returned candidates,
   and their mean time; then every timed query once more one by one and again by four
   threads at once (``at_once``: recalls per second each way, and whether the results
   were the same, ``slm_bench.together``). The process reports its peak RSS (``peak_rss_mb``).
3. Default-model ingest. Back in this process, ``extra`` (1,000) further memories go into the
   same store in batches of 500, embedded by the store's own model: ``ingest_per_s``. Then
   ``SINGLES`` (50) more, one ``Memory.remember`` call each, model included, each timed
   alone: ``remember_ms`` (the model is loaded before the clock starts).

The store is deleted afterwards unless ``keep``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from slm.channels import enabled
from slm.embed import Embedder, Matrix, make_embedder
from slm.embed.base import normalise
from slm.engine import Memory
from slm.errors import ConfigError, InvalidInput, SlmError, install_hint
from slm.settings import Settings
from slm_bench import synth
from slm_bench.metrics import percentile
from slm_bench.report import step_latency, steps_text
from slm_bench.together import at_once

K = 10
WARMUP = 20
TRACED = 20
BULK_BATCH = synth.CHUNK
EXTRA = 1000
EXTRA_BATCH = 500
#: Memories stored one ``remember`` call each after the batched model ingest.
SINGLES = 50
STORE_NAME = "scale.db"
#: Where a benchmark's store is: an SQLite file, or a PostgreSQL DSN.
Where = Path | str

Progress = Callable[[str], None]


def default_cache_dir() -> Path:
    """Where token tables are cached: ``~/.cache/slm/bench`` on Linux."""
    from platformdirs import user_cache_path

    return user_cache_path("slm") / "bench"


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB.

    Linux's ``VmHWM`` when readable: unlike ``getrusage``'s ``ru_maxrss``, which a child
    inherits from its parent across fork and exec, it belongs to this process image alone.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def store_files(db: Path) -> list[Path]:
    """Every file next to ``db`` whose name starts with its stem, folders' files included."""
    files: list[Path] = []
    for entry in db.parent.glob(f"{db.stem}*"):
        files += [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()]
    return files


def store_bytes(db: Path) -> int:
    """Bytes of the store's files (:func:`store_files`)."""
    return sum(path.stat().st_size for path in store_files(db))


def evict_page_cache(db: Path) -> bool:
    """Ask the operating system to drop the store's files from its page cache, so serving
    starts from the disk whatever ran before (no privileges needed: ``posix_fadvise``).
    False where the platform has no such call (macOS, Windows)."""
    advise = getattr(os, "posix_fadvise", None)
    if advise is None:
        return False
    for path in store_files(db):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages stay cached until written
            advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True


def _settings_json(settings: Settings) -> dict[str, Any]:
    return {
        f.name: dict(v) if isinstance(v := getattr(settings, f.name), Mapping) else v
        for f in fields(settings)
    }


def _settings_from(data: Mapping[str, Any]) -> Settings:
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return Settings(**values)


def _machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# -- composed vectors ---------------------------------------------------------------------


class Precomputed:
    """An embedder that hands back the vectors of the batch being loaded (composed, or the
    model's own), so the bulk load goes through the same insert path as any other; a text
    it was not given (a standing statement's scope) is embedded by ``model`` and kept, so
    that each text is embedded once (the lifecycle benchmark stores each history thrice)."""

    def __init__(self, model: Embedder) -> None:
        self.name, self.dim = model.name, model.dim
        self._model = model
        self._table: dict[str, Matrix] = {}

    def load(self, texts: Sequence[str], vectors: Matrix) -> None:
        self._table = dict(
            zip(texts, normalise(np.asarray(vectors, dtype=np.float32)), strict=True)
        )

    def embed_batch(self, texts: Sequence[str]) -> Matrix:
        missing = [text for text in dict.fromkeys(texts) if text not in self._table]
        if missing:
            self._table.update(zip(missing, self._model.embed_batch(missing), strict=True))
        return np.asarray([self._table[text] for text in texts], dtype=np.float32).reshape(
            len(texts), self.dim
        )

    def health(self) -> dict[str, object]:
        return self._model.health()


def token_table(
    gen: synth.Synth,
    embedder: Embedder,
    cache_dir: Path,
    progress: Callable[[str], None] | None = None,
) -> tuple[Matrix, bool]:
    """Vectors of every token in ``gen.tokens`` from ``embedder`` and whether they came from
    the cache. The file name carries the seed, the vocabulary size, the model name and a hash
    of the token list, so a different generator never reads a stale table."""
    digest = hashlib.sha256("\n".join((embedder.name, *gen.tokens)).encode()).hexdigest()
    model = re.sub(r"[^A-Za-z0-9.-]+", "_", embedder.name)
    path = cache_dir / f"tokens-{model}-seed{gen.seed}-v{gen.vocab_size}-{digest[:12]}.npy"
    if path.is_file():
        table = np.load(path)
        if table.shape == (len(gen.tokens), embedder.dim):
            return table.astype(np.float32), True
    parts = []
    for start in range(0, len(gen.tokens), 1024):
        parts.append(embedder.embed_batch(list(gen.tokens[start : start + 1024])))
        done = start + len(parts[-1])
        if progress and (len(parts) % 8 == 0 or done == len(gen.tokens)):
            progress(f"token table: {done:,}/{len(gen.tokens):,} tokens embedded")
    table = np.vstack(parts).astype(np.float32)
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.npy")
    np.save(partial, table)
    partial.replace(path)
    return table, False


def compose(table: Matrix, batch: synth.Batch) -> Matrix:
    """Unit vectors ``normalise(sum_j weight_j * table[token_j])`` for the batch's memories."""
    padded = np.vstack([table, np.zeros((1, table.shape[1]), dtype=np.float32)])
    out = np.empty((len(batch.items), table.shape[1]), dtype=np.float32)
    for start in range(0, len(out), 1000):
        rows = slice(start, start + 1000)
        weights = batch.weights[rows].astype(np.float32)
        out[rows] = np.einsum("bk,bkd->bd", weights, padded[batch.tokens[rows]])
    return normalise(out)


# -- the run ------------------------------------------------------------------------------


def run(
    n: int,
    *,
    seed: int = 0,
    queries: int = 200,
    directory: Path | None = None,
    keep: bool = False,
    real_vectors: bool = False,
    settings: Settings | None = None,
    cache_dir: Path | None = None,
    extra: int = EXTRA,
    singles: int = SINGLES,
    cold: bool = False,
    progress: Progress | None = None,
    dsn: str | None = None,
) -> dict[str, Any]:
    """Run the benchmark (see the module docstring) and return the report; with ``dsn``, on
    that PostgreSQL database, which must hold no memory (it keeps them afterwards)."""
    if n < queries + WARMUP or queries < 1:
        raise InvalidInput(
            f"{queries} queries need n >= {queries + WARMUP} (they and {WARMUP} warm-up ones "
            "each target a different memory)",
            field="queries",
        )
    settings = settings or Settings.from_env(calibration=None)
    say = progress or (lambda line: None)
    started, clock = _now(), time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="slm-scale-")) if directory is None else directory
    folder.mkdir(parents=True, exist_ok=True)
    db: Where = folder / STORE_NAME if dsn is None else dsn
    if dsn is not None:
        if cold:
            raise ConfigError("--cold drops a file's pages from the cache: SQLite only")
        with Memory(dsn=dsn, settings=settings) as memory:
            if memory.store.profiles():
                raise ConfigError("the database already holds memories; give an empty one")
    elif any(folder.glob(f"{STORE_NAME.split('.')[0]}*")):
        raise ConfigError(f"{folder} already holds a scale store; choose an empty --dir")
    try:
        gen = synth.Synth(n, seed, queries=queries + WARMUP, warmup=WARMUP)
        embedder = make_embedder(settings.embedder)
        report, asked = _bulk(gen, db, settings, embedder, real_vectors, cache_dir, say)
        if isinstance(db, Path):
            report["disk_bytes"] = store_bytes(db)
            report["disk_bytes_per_memory"] = round(report["disk_bytes"] / n, 1)
            say(f"store: {report['disk_bytes'] / 2**20:.1f} MiB on disk; serving in a new process")
        report["page_cache"] = "as the bulk load left it"
        if cold and isinstance(db, Path):
            evicted = evict_page_cache(db)
            report["page_cache"] = "evicted" if evicted else "eviction not supported here"
        report.update(serve_in_subprocess(db, settings, asked))
        report.update(model_ingest(gen, db, settings, embedder, extra, say, singles))
    finally:
        if not keep and isinstance(db, Path):
            _remove_store(folder, db, temporary=directory is None)
        elif directory is None:
            shutil.rmtree(folder, ignore_errors=True)
    report = {
        "benchmark": "scale",
        "n": n,
        "seed": seed,
        "vectors": "real" if real_vectors else "composed",
        "queries": queries,
        "warmup": WARMUP,
        "k": K,
        **report,
        "channels": list(enabled(settings)),
        "store": (str(db) if keep else None) if isinstance(db, Path) else "postgresql",
        "machine": _machine(),
        "started_at": started,
        "finished_at": _now(),
        "duration_s": round(time.perf_counter() - clock, 1),
    }
    return report


def _remove_store(folder: Path, db: Path, *, temporary: bool) -> None:
    if temporary:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for entry in folder.glob(f"{db.stem}*"):
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _open(db: Where, **options: Any) -> Memory:
    """The store at ``db``: an SQLite file, or a PostgreSQL DSN."""
    return Memory(dsn=db, **options) if isinstance(db, str) else Memory(db, **options)


def _bulk(
    gen: synth.Synth,
    db: Where,
    settings: Settings,
    embedder: Embedder,
    real_vectors: bool,
    cache_dir: Path | None,
    say: Progress,
) -> tuple[dict[str, Any], list[synth.SynthQuery]]:
    """Step 1: the timed bulk load; report fields and the generator's queries."""
    table = None
    out: dict[str, Any] = {"embedder": embedder.name}
    if not real_vectors:
        start = time.perf_counter()
        table, cached = token_table(gen, embedder, cache_dir or default_cache_dir(), say)
        out["token_table"] = {
            "tokens": len(gen.tokens),
            "cached": cached,
            "seconds": round(time.perf_counter() - start, 1),
        }
    found: list[synth.SynthQuery] = []
    timed = 0.0
    done, every = 0, max(1, gen.n // BULK_BATCH // 10)
    begin = time.perf_counter()
    given = Precomputed(embedder)
    with _open(db, settings=settings, embedder=given) as memory:
        for number, batch in enumerate(gen.batches(), start=1):
            texts = [item.content for item in batch.items]
            if table is None:
                given.load(texts, embedder.embed_batch(texts))
            else:
                given.load(texts, compose(table, batch))
            start = time.perf_counter()
            memory.remember_many(batch.items)
            timed += time.perf_counter() - start
            done += len(batch.items)
            found.extend(batch.queries)
            if number % every == 0 or done == gen.n:
                say(f"bulk load: {done:,}/{gen.n:,} memories, {done / timed:,.0f}/s")
    out.update(
        {
            "ingest_per_s_precomputed": round(gen.n / timed, 1),
            "bulk_batch": BULK_BATCH,
            "bulk_s": round(timed, 2),
            "generate_s": round(time.perf_counter() - begin - timed, 2),
            "peak_rss_ingest_mb": peak_rss_mb(),
        }
    )
    return out, found


def model_ingest(
    gen: synth.Synth,
    db: Where,
    settings: Settings,
    embedder: Embedder,
    extra: int,
    say: Progress,
    singles: int = SINGLES,
) -> dict[str, Any]:
    """Step 3: ``extra`` memories embedded by the store's model, batches of ``EXTRA_BATCH``,
    then ``singles`` more stored one ``remember`` call each."""
    if extra <= 0 and singles <= 0:
        return {
            "ingest_per_s": None,
            "ingest_memories": 0,
            "ingest_batch": EXTRA_BATCH,
            "remember_ms": None,
        }
    if extra:
        say(f"default-model ingest: {extra:,} more memories, batches of {EXTRA_BATCH}")
    items = [item for batch in gen.extra(extra + singles, EXTRA_BATCH) for item in batch.items]
    embedder.embed_batch(["load the model before the clock starts"])
    elapsed, single_ms = 0.0, []
    with _open(db, settings=settings, embedder=embedder) as memory:
        for start in range(0, extra, EXTRA_BATCH):
            batch = items[start : min(start + EXTRA_BATCH, extra)]
            clock = time.perf_counter()
            memory.remember_many(batch)
            elapsed += time.perf_counter() - clock
        if singles:
            say(f"single remember: {singles} memories, one call each")
            # Opened and warm (graph index loaded) before the clock starts, as after a batch.
            memory.recall(items[extra].content, k=1)
        for item in items[extra:]:
            clock = time.perf_counter()
            memory.remember(
                item.content,
                event_time=item.event_time,
                source=item.source,
                metadata=item.metadata,
            )
            single_ms.append((time.perf_counter() - clock) * 1000)
    return {
        "ingest_per_s": round(extra / elapsed, 1) if extra else None,
        "ingest_memories": extra,
        "ingest_batch": EXTRA_BATCH,
        "remember_ms": _spread(single_ms) if single_ms else None,
    }


def _spread(ms: Sequence[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(ms, 50), 3),
        "p95": round(percentile(ms, 95), 3),
        "p99": round(percentile(ms, 99), 3),
        "mean": round(sum(ms) / len(ms), 3),
        "max": round(max(ms), 3),
    }


# -- serving (runs in a fresh process) -----------------------------------------------------


def serve_in_subprocess(
    db: Where, settings: Settings, queries: Sequence[synth.SynthQuery]
) -> dict[str, Any]:
    """Step 2 in a new interpreter (``python -m slm_bench.scale SPEC``); its report."""
    ordered = sorted(queries, key=lambda q: (not q.warmup, q.target))
    spec = {
        "db": str(db),
        "dsn": isinstance(db, str),
        "settings": _settings_json(settings),
        "queries": [
            {
                "text": q.text,
                "target": q.target,
                "now": q.now.isoformat() if q.now else None,
                "kind": q.kind,
                "warmup": q.warmup,
            }
            for q in ordered
        ],
    }
    with tempfile.TemporaryDirectory(prefix="slm-scale-spec-") as tmp:
        path = Path(tmp) / "spec.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "-m", "slm_bench.scale", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise SlmError(f"the serving process failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def serve(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Open the store, warm up, time the queries, score them, trace a few (step 2)."""
    questions = spec["queries"]
    warm = [q for q in questions if q["warmup"]]
    timed = [q for q in questions if not q["warmup"]]
    settings = _settings_from(spec["settings"])
    first = warm[0] if warm else timed[0]
    start = time.perf_counter()
    memory = _open(spec["db"] if spec.get("dsn") else Path(spec["db"]), settings=settings)
    try:
        memory.recall(first["text"], k=K, now=first["now"])
        opened = time.perf_counter() - start
        for q in warm[1:]:
            memory.recall(q["text"], k=K, now=q["now"])
        latencies, ranks, abstained = [], [], 0
        for q in timed:
            start = time.perf_counter()
            response = memory.recall(q["text"], k=K, now=q["now"])
            latencies.append((time.perf_counter() - start) * 1000)
            ids = [r.memory.id for r in response.results]
            ranks.append(ids.index(q["target"]) + 1 if q["target"] in ids else 0)
            abstained += response.abstained
        embedded = []  # the floor of a recall: the question's embedding alone, same run
        for q in timed:
            start = time.perf_counter()
            memory.embedder.embed_batch([q["text"]])
            embedded.append((time.perf_counter() - start) * 1000)
        channels = _traced(memory, timed[:TRACED])
        filtered = _filtered(memory, timed)
        together = at_once(
            lambda q: [r.memory.id for r in memory.recall(q["text"], k=K, now=q["now"]).results],
            timed,
        )
    finally:
        memory.close()
    return {
        "open_to_first_recall_s": round(opened, 3),
        "latency_ms": _spread(latencies),
        "embed_ms": _spread(embedded),
        **filtered,
        "at_once": together,
        "hit@1": round(sum(r == 1 for r in ranks) / len(ranks), 4),
        "hit@10": round(sum(0 < r <= K for r in ranks) / len(ranks), 4),
        "abstained": round(abstained / len(ranks), 4),
        "hit@10_by_kind": _by_kind(timed, ranks),
        "missed": [q["text"] for q, r in zip(timed, ranks, strict=True) if r == 0][:20],
        "channels_ran": channels,
        "peak_rss_mb": peak_rss_mb(),
    }


#: The share of the store a filtered recall keeps (metadata ``conversation``).
FILTER_SHARE = 0.10
#: Filtered recalls compared with a wide unfiltered recall filtered afterwards.
AFTERWARDS = 50


def _filtered(memory: Memory, timed: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The same questions with a metadata filter keeping about ``FILTER_SHARE`` of the store
    (whole conversations, the largest first): latency, and whether every result is inside."""
    counts: dict[str, int] = {}
    after = 0
    while records := memory.store.scan(memory.profile, after, 5000):
        for record in records:
            name = str(record.metadata.get("conversation"))
            counts[name] = counts.get(name, 0) + 1
        after = records[-1].key
    chosen: list[str] = []
    kept, total = 0, sum(counts.values())
    for name, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        if kept >= FILTER_SHARE * total or len(chosen) == 100:
            break
        chosen.append(name)
        kept += n
    rule = {"conversation": chosen}
    latencies, outside, found = [], 0, []
    for q in timed:
        start = time.perf_counter()
        response = memory.recall(q["text"], k=K, now=q["now"], metadata=rule)
        latencies.append((time.perf_counter() - start) * 1000)
        outside += sum(r.memory.metadata.get("conversation") not in chosen
                       for r in response.results)  # fmt: skip
        found.append([r.memory.id for r in response.results])
    # The same results as filtering afterwards? A wide unfiltered recall, then the filter.
    overlap = []
    for q, ids in zip(timed[:AFTERWARDS], found, strict=False):
        wide = memory.recall(q["text"], k=1000, now=q["now"]).results
        inside = [r.memory.id for r in wide if r.memory.metadata.get("conversation") in chosen]
        if len(inside) >= K:
            overlap.append(len(set(ids) & set(inside[:K])) / K)
    return {
        "filtered_share": round(kept / max(1, total), 4),
        "filtered_latency_ms": _spread(latencies),
        "filtered_results_outside": outside,
        "filtered_same_as_afterwards": round(sum(overlap) / len(overlap), 4) if overlap else None,
        "filtered_compared": len(overlap),
    }


def _traced(memory: Memory, questions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    ran: Counter[str] = Counter()
    with_hits: Counter[str] = Counter()
    ms: dict[str, float] = {}
    steps: list[dict[str, float]] = []
    for q in questions:
        trace = memory.recall(q["text"], k=K, now=q["now"], trace=True).trace or {}
        for name, block in trace.get("channels", {}).items():
            ran[name] += bool(block["ran"])
            with_hits[name] += bool(block["candidates"])
            ms[name] = ms.get(name, 0.0) + float(block["ms"])
        steps.append(dict(trace.get("timings_ms", {})))
    names = list(memory.channels)
    return {
        "queries": len(questions),
        "all": [name for name in names if ran[name] == len(questions)],
        "ran": {name: ran[name] for name in names},
        "with_candidates": {name: with_hits[name] for name in names},
        "mean_ms": {name: round(ms.get(name, 0.0) / max(len(questions), 1), 3) for name in names},
        **step_latency(steps),
    }


def _by_kind(questions: Sequence[Mapping[str, Any]], ranks: Sequence[int]) -> dict[str, Any]:
    kinds: dict[str, list[int]] = {}
    for q, rank in zip(questions, ranks, strict=True):
        kinds.setdefault(q["kind"], []).append(rank)
    return {
        kind: {"n": len(r), "hit@10": round(sum(0 < x <= K for x in r) / len(r), 4)}
        for kind, r in sorted(kinds.items())
    }


# -- output -------------------------------------------------------------------------------


def _p50_p95(spread: Mapping[str, float] | None) -> str:
    return f"p50 {spread['p50']:.1f} / p95 {spread['p95']:.1f} ms" if spread else "-"


def markdown(report: Mapping[str, Any]) -> str:
    """The report as a short Markdown table."""
    lat, chan = report["latency_ms"], report["channels_ran"]
    rate, single = report["ingest_per_s"], report.get("remember_ms")
    rows = [
        (
            "bulk ingest, precomputed vectors",
            f"{report['ingest_per_s_precomputed']:,.0f} memories/s "
            f"(batches of {report['bulk_batch']:,})",
        ),
        (
            "ingest, embedded by the model",
            "not measured"
            if rate is None
            else f"{rate:,.1f} memories/s ({report['ingest_memories']:,} memories, "
            f"batches of {report['ingest_batch']})",
        ),
        (
            "one remember call (model included) p50 / p95 / max",
            "not measured"
            if single is None
            else f"{single['p50']:.1f} / {single['p95']:.1f} / {single['max']:.1f} ms",
        ),
        (
            "recall latency p50 / p95 / p99 / mean",
            f"{lat['p50']:.1f} / {lat['p95']:.1f} / {lat['p99']:.1f} / {lat['mean']:.1f} ms",
        ),
        (
            "the question's embedding alone p50 / p95; recall p50 / its p50",
            f"{emb['p50']:.1f} / {emb['p95']:.1f} ms; {lat['p50'] / emb['p50']:.2f}x"
            if (emb := report.get("embed_ms"))
            else "not measured",
        ),
        (
            f"recall with a metadata filter keeping {report.get('filtered_share', 0):.0%}",
            _p50_p95(report.get("filtered_latency_ms")),
        ),
        (
            "its top 10 shared with filtering a top 1,000 afterwards",
            "-"
            if report.get("filtered_same_as_afterwards") is None
            else f"{report['filtered_same_as_afterwards']:.1%} "
            f"({report['filtered_compared']} questions with 10 left after filtering)",
        ),
        (
            "recalls per second, one thread / several at once",
            f"{t['recalls_per_s_one']:.1f} / {t['recalls_per_s_together']:.1f} "
            f"({t['threads']} threads): {t['throughput_ratio']:.2f}x"
            + ("" if t["same_results_together"] else "; results differed")
            if (t := report.get("at_once"))
            else "not measured",
        ),
        ("hit@1 / hit@10", f"{report['hit@1']:.3f} / {report['hit@10']:.3f}"),
        ("abstained", f"{report['abstained']:.1%}"),
        (
            f"channels that ran in all {chan['queries']} traced recalls",
            ", ".join(chan["all"]) or "none",
        ),
        (
            "where a traced recall goes, p50 of each step",
            steps_text(split) + " ms" if (split := chan.get("steps_p50")) else "not measured",
        ),
        ("open to first recall", f"{report['open_to_first_recall_s']:.2f} s"),
        ("page cache before serving", report.get("page_cache", "not recorded")),
        (
            "peak RSS serving / ingest",
            f"{report['peak_rss_mb']:,.0f} / {report['peak_rss_ingest_mb']:,.0f} MiB",
        ),
        (
            "disk per memory",
            f"{per:,.0f} bytes"
            if (per := report.get("disk_bytes_per_memory")) is not None
            else "not measured (PostgreSQL)",
        ),
    ]
    head = (
        f"slm bench scale: {report['n']:,} memories (seed {report['seed']}, "
        f"{report['vectors']} vectors), {report['queries']} timed queries after "
        f"{report['warmup']} warm-up; {report['duration_s']:.0f} s"
    )
    return "\n".join(
        [head, "", "| measure | value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows]
    )


def plot(reports: Sequence[Mapping[str, Any]], out: Path) -> None:
    """Recall latency p50/p95/p99 against N (log scale) as a PNG."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(f"slm bench plot needs matplotlib: {install_hint('bench')}") from None
    matplotlib.use("Agg")
    from matplotlib import pyplot

    ordered = sorted(reports, key=lambda r: int(r["n"]))
    sizes = [int(r["n"]) for r in ordered]
    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for key, marker in (("p50", "o"), ("p95", "s"), ("p99", "^")):
        axes.plot(sizes, [float(r["latency_ms"][key]) for r in ordered], marker=marker, label=key)
    axes.set_xscale("log")
    axes.set_xlabel("memories in the store (N)")
    axes.set_ylabel("recall latency (ms)")
    axes.set_title("slm recall latency against store size")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=120)
    pyplot.close(figure)


def _main(argv: Sequence[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    print(json.dumps(serve(spec)))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
