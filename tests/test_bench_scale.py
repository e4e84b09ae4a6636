"""The scale benchmark: a deterministic generator, and one small end-to-end run with the fake
embedder (the real run is ``slm bench scale --n 10000``, see docs/benchmarks.md)."""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import UTC
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from click.testing import CliRunner

from slm.cli import cli
from slm.embed.fake import FakeEmbedder
from slm.engine import MemoryInput
from slm.ingest.entities import extract_entities
from slm.ingest.text import terms
from slm.ingest.timeexpr import referenced_spans
from slm_bench import synth
from slm_bench.scale import compose, store_bytes, token_table


class Corpus(NamedTuple):
    gen: synth.Synth
    items: list[MemoryInput]
    queries: list[synth.SynthQuery]


def _generate(seed: int) -> Corpus:
    gen = synth.Synth(3000, seed=seed, queries=60, warmup=10)
    batches = list(gen.batches())
    items = [item for batch in batches for item in batch.items]
    return Corpus(gen, items, [q for batch in batches for q in batch.queries])


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return _generate(7)


@pytest.fixture(scope="module")
def small(corpus: Corpus) -> synth.Synth:
    return corpus.gen


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Token tables shared by this module's tests (the fake embedder's take a second or two)."""
    return tmp_path_factory.mktemp("token-cache")


def test_same_seed_same_corpus_other_seed_another(corpus: Corpus) -> None:
    again = _generate(7)
    assert again.items == corpus.items and again.queries == corpus.queries
    other = _generate(8)
    assert [i.content for i in other.items[:50]] != [i.content for i in corpus.items[:50]]
    assert [q.text for q in other.queries] != [q.text for q in corpus.queries]


def test_vocabulary_is_large_and_stems_are_distinct(small: synth.Synth) -> None:
    assert len(small.vocabulary) >= 20_000
    assert len(small.words) == 20_000
    assert len({terms(w)[0] for w in small.words}) == 20_000
    assert len(small.entities) == 5_000 and len(set(small.entities)) == 5_000
    assert 250 <= len(small.speakers) <= 400


def test_memories_form_dated_sessions_with_entities(corpus: Corpus) -> None:
    items = corpus.items
    assert len(items) == 3000
    assert [item.id for item in items[:2]] == [synth.memory_id(0), synth.memory_id(1)]
    sessions = Counter(
        (item.metadata["conversation"], item.metadata["session"])  # type: ignore[index]
        for item in items
    )
    assert all(5 <= size <= 30 for size in list(sessions.values())[:-1])
    assert all(item.event_time.tzinfo is UTC for item in items)  # type: ignore[union-attr]
    years = {item.event_time.year for item in items}  # type: ignore[union-attr]
    assert years == {2020, 2021, 2022, 2023, 2024}
    first, second = items[0], items[1]
    assert first.content.split(":")[0] != second.content.split(":")[0]
    assert 10 <= np.mean([len(item.content.split()) for item in items]) <= 25
    sample = items[:300]
    named = sum(any(not m.speaker for m in extract_entities(i.content)) for i in sample)
    speakers = sum(extract_entities(i.content)[0].speaker for i in sample)
    dated = sum(bool(referenced_spans(i.content, i.event_time)) for i in sample)  # type: ignore[arg-type]
    assert speakers == len(sample)
    assert named > 100 and 20 < dated < 150


def test_queries_are_answerable_and_not_copies(corpus: Corpus) -> None:
    small, queries = corpus.gen, corpus.queries
    items = {item.id: item for item in corpus.items}
    content_terms = {terms(w)[0] for w in small.words}
    assert len(queries) == 60 and sum(q.warmup for q in queries) == 10
    assert len({q.kind for q in queries}) >= 5
    for q in queries:
        target = items[q.target].content
        assert q.text not in target
        shared = set(terms(q.text)) & set(terms(target))
        assert len(shared & content_terms) >= 2, q.text
        if q.kind == "relative":
            assert q.now is not None and "last week" in q.text


def test_composed_vectors_are_unit_and_follow_their_words(small: synth.Synth, cache: Path) -> None:
    table, _ = token_table(small, FakeEmbedder(), cache)
    again, cached = token_table(small, FakeEmbedder(), cache)
    assert cached and np.array_equal(again, table)
    batch = next(small.batches())
    vectors = compose(table, batch)
    assert vectors.shape == (len(batch.items), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    word = table[int(batch.tokens[0, 0])]
    assert float(vectors[0] @ word) > float(np.median(vectors[1:] @ word))


def test_small_run_reports_everything_and_plots(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLM_EMBEDDER", "fake")
    runner = CliRunner()
    store = tmp_path / "store"
    out = tmp_path / "report.json"
    args = ["bench", "scale", "--n", "500", "--queries", "10", "--extra", "40", "--singles", "5"]
    args += ["--cold", "--json"]
    args += ["--dir", str(store), "--cache-dir", str(cache), "--out", str(out)]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report == json.loads(out.read_text(encoding="utf-8"))
    assert report["n"] == 500 and report["vectors"] == "composed"
    assert report["ingest_per_s"] > 0 and report["ingest_memories"] == 40
    assert report["ingest_per_s_precomputed"] > 0
    assert report["page_cache"] == (
        "evicted" if hasattr(os, "posix_fadvise") else "eviction not supported here"
    )
    assert report["command"].endswith("--cold")
    single = report["remember_ms"]
    assert 0 < single["p50"] <= single["p95"] <= single["max"]
    latency = report["latency_ms"]
    assert 0 < latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]
    embedded = report["embed_ms"]
    assert 0 < embedded["p50"] <= embedded["p95"] <= embedded["max"]
    assert report["channels_ran"]["queries"] == 10
    steps = report["channels_ran"]["steps_p50"]  # where the traced recalls' time went
    assert list(steps)[:4] == ["interpret", "while embedding", "embedding wait", "channels"]
    assert steps["embedding wait"] > 0
    together = report["at_once"]
    assert together["threads"] == 4 and together["same_results_together"] is True
    assert together["recalls_per_s_one"] > 0 and together["recalls_per_s_together"] > 0
    assert set(report["channels_ran"]["all"]) == set(report["channels"])
    assert report["peak_rss_mb"] > 20 and report["peak_rss_ingest_mb"] > 20
    assert 500 < report["disk_bytes_per_memory"] < 100_000
    assert 0 < report["open_to_first_recall_s"] < 60
    assert report["hit@10"] >= 0.8 and 0 <= report["hit@1"] <= report["hit@10"]
    assert 0 <= report["abstained"] <= 1
    assert report["machine"]["cpus"] >= 1 and report["started_at"] <= report["finished_at"]
    assert store_bytes(store / "scale.db") == 0  # removed without --keep

    pytest.importorskip("matplotlib")
    bigger = tmp_path / "bigger.json"
    bigger.write_text(json.dumps({**report, "n": 5000}), encoding="utf-8")
    png = tmp_path / "latency.png"
    result = runner.invoke(cli, ["bench", "plot", str(out), str(bigger), "--out", str(png)])
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_small_run_on_postgresql(
    postgres_dsn: str, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--dsn``: the same steps on an empty PostgreSQL database (no disk figure, no cold
    start); a database that already holds memories is refused, and so is ``--cold``."""
    monkeypatch.setenv("SLM_EMBEDDER", "fake")
    runner = CliRunner()
    args = ["bench", "scale", "--n", "300", "--queries", "10", "--extra", "20", "--singles"]
    args += ["3", "--json", "--cache-dir", str(cache), "--dsn", postgres_dsn]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["store"] == "postgresql" and report["command"].endswith("--dsn ...")
    assert "disk_bytes_per_memory" not in report and report["hit@10"] >= 0.8
    assert report["latency_ms"]["p50"] > 0 and report["ingest_memories"] == 20
    again = runner.invoke(cli, args)
    assert again.exit_code != 0 and "already holds memories" in again.output
    cold = runner.invoke(cli, [*args, "--cold"])
    assert cold.exit_code != 0 and "SQLite only" in cold.output


def test_plot_rejects_a_file_that_is_not_a_report(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"n": 3}', encoding="utf-8")
    result = CliRunner().invoke(cli, ["bench", "plot", str(bad), "--out", str(tmp_path / "x.png")])
    assert result.exit_code != 0 and "not a 'bench scale' report" in result.output


@pytest.mark.parametrize(
    ("flag", "value"), [("--singles", "-1"), ("--extra", "-5"), ("--singles", "many")]
)
def test_scale_rejects_bad_counts_before_doing_anything(
    tmp_path: Path, flag: str, value: str
) -> None:
    store = tmp_path / "store"
    args = ["bench", "scale", "--n", "500", "--dir", str(store), flag, value]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and flag in result.output
    assert not store.exists()  # nothing generated, nothing stored
