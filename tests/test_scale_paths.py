"""The bounded-work paths that only large stores take, forced on small ones: cut postings
with exact rescoring, time windows too full to rank whole, hub entities, and one shared
vector search per recall."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import slm.channels.postings as lexicon
import slm.channels.temporal as temporal
from slm import Memory, Settings
from slm.channels import Context, Query
from slm.channels.bm25 import BM25Channel


def filled(path: Path) -> Memory:
    memory = Memory(path, settings=Settings(embedder="fake"))
    start = datetime(2024, 1, 1, tzinfo=UTC)
    items = [
        {
            "content": f"Ann: the garden needs water today, note {i}"
            + (" and the heron visited the pond" if i % 7 == 0 else "")
            + (" heron heron" if i == 42 else ""),
            "event_time": start + timedelta(hours=i),
        }
        for i in range(120)
    ]
    memory.remember_many(items)
    return memory


def bm25_ranking(memory: Memory, text: str) -> list[tuple[int, float]]:
    from slm.ingest.text import query_terms

    query = Query(
        text=text,
        profile=memory.profile,
        vector=memory.embedder.embed_batch([text])[0],
        terms=tuple(query_terms(text)),
        now=datetime.now(UTC),
    )
    channel = BM25Channel(memory.settings)
    return [
        (h.key, round(h.score, 4))
        for h in channel.candidates(Context(memory.store, memory.indexes, query), 10)
    ]


def test_cut_postings_rescore_to_the_exact_ranking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Common terms ("garden", "water": in all 120 memories) are cut at 20 postings; every
    memory holding the rarer "heron" (18 of them) is still read, and the rescoring gives
    them their exact scores, common terms included: the same top 10 as reading everything."""
    with filled(tmp_path / "m.db") as memory:
        full = bm25_ranking(memory, "garden water heron")
        monkeypatch.setattr(lexicon, "POSTINGS_PER_TERM", 20)
        cut = bm25_ranking(memory, "garden water heron")
        assert cut == full
        assert full[0][0] == memory.recall("heron").results[0].memory.key


def test_full_time_window_ranks_the_topical_memories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with filled(tmp_path / "m.db") as memory:
        monkeypatch.setattr(temporal, "WINDOW_CAP", 10)
        response = memory.recall("heron in January 2024", trace=True)
        assert response.trace is not None
        hits = response.trace["channels"]["temporal"]["candidates"]
        assert hits, "the temporal channel still answers from the neighbourhood"
        assert len(hits) <= 50


def test_one_vector_search_per_recall(tmp_path: Path) -> None:
    with filled(tmp_path / "m.db") as memory:
        calls = []
        search = memory.indexes.vectors.search

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            calls.append(args[2])
            return search(*args, **kwargs)

        memory.indexes.vectors.search = counted  # type: ignore[method-assign]
        memory.recall("when did the heron visit the garden?")
        assert len(calls) == 1
