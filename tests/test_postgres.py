"""What only the PostgreSQL store has to prove: migrations under concurrent connects, tenant
isolation on a shared server, BM25 identical to the SQLite store, pgvector search, and
several processes writing at once. (Everything else runs on both stores elsewhere.)"""

from __future__ import annotations

import json
import logging
import multiprocessing
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from postgres_server import Server
from postgres_server import rows as sql

from slm import ConfigError, Memory, Settings, StoreError
from slm.engine import content_hash
from slm.index import vector_cache
from slm.store import Filters, schema
from slm.store.postgres import PostgresStore, redact

CORPUS = [
    "Caroline went to the LGBTQ support group yesterday and felt accepted",
    "Melanie is painting a lake sunrise for the kids' room",
    "Caroline is researching adoption agencies; adoption is a big step",
    "Melanie took the kids camping at the lake last summer",
    "The support group meets every Tuesday evening near the lake",
    "Caroline: the painting of the lake is beautiful, Melanie",
    "Running, reading and painting help Melanie relax",
]


def fake(**store: Any) -> Memory:
    return Memory(**store, settings=Settings(embedder="fake"))


def test_concurrent_first_connects_migrate_once(postgres_server: Server) -> None:
    dsn = postgres_server.empty_database()
    errors: list[BaseException] = []

    def connect() -> None:
        try:
            PostgresStore(dsn, dim=384).close()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=connect) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    versions = sql(dsn, "postgres", "SELECT version FROM slm_schema ORDER BY version")
    count = len(schema.versions(PostgresStore.dialect, 384))
    assert versions == [(n,) for n in range(1, count + 1)]
    indexes = {r[0] for r in sql(dsn, "postgres", "SELECT indexname FROM pg_indexes")}
    assert {"changes_pkey", "memories_event", "memory_times_start", "edges_dst"} <= indexes


def test_a_store_keeps_its_vector_dimension(postgres_dsn: str) -> None:
    with pytest.raises(ConfigError, match="dimension 384, not 8"):
        PostgresStore(postgres_dsn, dim=8)


def test_errors_name_the_server_not_the_password(postgres_server: Server) -> None:
    assert "secret" not in redact("postgresql://ann:secret@db.example:5432/slm")
    dsn = f"postgresql://postgres:secret@127.0.0.1:{postgres_server.port}/no_such_database"
    with pytest.raises(StoreError, match="no_such_database") as caught:
        fake(dsn=dsn)
    assert "secret" not in str(caught.value)


def test_the_extra_is_named_when_psycopg_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "slm.store.postgres", None)
    with pytest.raises(ConfigError, match=r"pip install '\.\[postgres\]'"):
        fake(dsn="postgresql://127.0.0.1/none")


def test_no_query_crosses_profiles(postgres_dsn: str) -> None:
    """Bob's store calls, given Alice's keys, ids, entities and terms, return nothing."""
    with fake(dsn=postgres_dsn, profile="alice") as alice, fake(dsn=postgres_dsn) as bob:
        theirs = alice.remember_many(
            [{"content": t, "event_time": "2023-05-08", "metadata": {"session": 1}} for t in CORPUS]
        )
        alice.feedback(theirs[0].id, useful=True)
        mine = bob.remember("Bob keeps bees near the lake", event_time="2023-05-08")
        store, keys = bob.store, [r.key for r in theirs]
        terms = ["lake", "caroline", "painting", "support"]
        found = alice.store.find_entities("alice", ["caroline"])
        entity_ids = [entity for matches in found.values() for entity, _, _ in matches]
        assert entity_ids
        assert store.get("default", [r.id for r in theirs]) == []
        assert store.get_by_keys("default", keys) == {}
        assert store.existing("default", [content_hash(t) for t in CORPUS]) == {}
        assert set(store.postings("default", terms, 100)) == {"lake"}
        assert store.postings("default", ["lake"], 100)["lake"].keys.tolist() == [mine.key]
        assert store.lexical_stats("default", terms).n_docs == 1
        assert store.find_entities("default", ["caroline", "melanie"]) == {}
        assert store.entity_members("default", entity_ids, 100) == {e: () for e in entity_ids}
        assert store.memory_entities("default", keys) == {}
        assert bob.indexes.edges.edges_from("default", keys) == {}
        assert store.referenced_times("default", keys) == {}
        assert store.event_times("default", keys) == {}
        assert not bob.indexes.vectors.get("default", keys).any()
        everything = (0, 2**62, 10_000)
        assert set(store.time_overlaps("default", *everything)) == {mine.key}
        query = alice.embedder.embed_batch([CORPUS[0]])[0]
        assert [k for k, _ in bob.indexes.vectors.search("default", query, 50, None)] == [mine.key]
        assert bob.indexes.vectors.search("default", query, 50, set(keys)) == []
        assert store.allowed_keys("default", Filters()) == {mine.key}
        assert store.count("default") == 1
        assert [r.id for r in store.page("default", 100, 0, Filters())] == [mine.id]
        assert [r.id for r in store.scan("default", 0, 100)] == [mine.id]
        assert store.feedback.trust("default", [""]) == {}
        assert store.delete("default", [r.id for r in theirs]) == []
        assert bob.reindex() == 1
        assert alice.count() == len(CORPUS)
        assert store.index_counts("alice")["lexical"] == len(CORPUS)
        assert store.profiles() == ["alice", "default"]


def test_bm25_is_identical_on_both_stores(tmp_path: Path, postgres_dsn: str) -> None:
    """Same postings, statistics, candidates and scores: BM25 is computed from the same
    tables by the same code, not by PostgreSQL's ts_rank."""
    results = []
    for store in ({"path": tmp_path / "b.db"}, {"dsn": postgres_dsn}):
        with fake(**store) as memory:
            ids = [r.id for r in memory.remember_many([{"content": t} for t in CORPUS])]
            memory.forget([ids[3]])  # statistics after a removal too
            stats = memory.store.lexical_stats(memory.profile, ["lake", "paint", "kid"])
            runs = []
            for query in ["lake painting", "support group Caroline", "adoption", "kids"]:
                trace = memory.recall(query, channels=["bm25"], trace=True, k=20).trace
                assert trace is not None
                hits = trace["channels"]["bm25"]["candidates"]
                runs.append([(ids.index(h["id"]), h["rank"], h["score"]) for h in hits])
            results.append((stats, runs))
    assert results[0] == results[1]
    assert results[0][1][0]  # the queries did find something


def random_units(n: int, dim: int = 384, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((n, dim)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def exact(matrix: np.ndarray, keys: list[int], query: np.ndarray, k: int) -> list[int]:
    scores = matrix @ query
    return [keys[i] for i in sorted(range(len(keys)), key=lambda i: (-scores[i], keys[i]))[:k]]


def test_vector_search_exact_and_through_the_graph(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's vectors are searched in this process, as SQLite's are: exactly, or
    through a graph index once a profile is large (made small here)."""
    matrix = random_units(300)
    table = {f"v{i}": matrix[i] for i in range(len(matrix))}

    class Table:
        name, dim = "table", 384

        def embed_batch(self, texts: list[str]) -> np.ndarray:
            return np.array([table[t] for t in texts], dtype=np.float32)

        def health(self) -> dict[str, object]:
            return {"healthy": True}

    with Memory(dsn=postgres_dsn, embedder=Table()) as memory:  # type: ignore[arg-type]
        keys = [r.key for r in memory.remember_many([{"content": t} for t in table])]
        queries = random_units(20, seed=11)
        allowed = set(keys[::7])
        for query in queries:
            found = memory.indexes.vectors.search("default", query, 10, None)
            assert [k for k, _ in found] == exact(matrix, keys, query, 10)
            assert found[0][1] == pytest.approx(float(matrix[keys.index(found[0][0])] @ query))
        assert memory.health()["store"]["vector_indexes"]["default"]["kind"] == "exact"
    monkeypatch.setattr(vector_cache, "EXACT_MAX", 100)  # a graph from 100 vectors on
    with Memory(dsn=postgres_dsn, embedder=Table()) as memory:  # type: ignore[arg-type]
        hits = 0
        for query in queries:
            found = [k for k, _ in memory.indexes.vectors.search("default", query, 10, None)]
            hits += len(set(found) & set(exact(matrix, keys, query, 10)))
            filtered = memory.indexes.vectors.search("default", query, 10, allowed, below=keys[150])
            assert len(filtered) == 10
            assert all(k in allowed and k < keys[150] for k, _ in filtered)
        assert memory.health()["store"]["vector_indexes"]["default"]["kind"] == "graph"
        assert hits / (10 * len(queries)) >= 0.9


def test_a_server_saves_its_indexes_and_the_next_follows_the_feed_from_them(
    postgres_server: Server, postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server saves a large profile's graph in SLM_INDEX_DIR under the database's
    identity; one started later loads it instead of reading every vector, and reads the
    feed from where it stands (what was written and forgotten meanwhile); a server told to
    save nowhere writes nothing, and a database of another identity never trusts it."""
    monkeypatch.setattr(vector_cache, "EXACT_MAX", 50)
    folder = tmp_path / "indexes"
    monkeypatch.setenv("SLM_INDEX_DIR", str(folder))
    with fake(dsn=postgres_dsn) as first:
        ids = [r.id for r in first.remember_many([{"content": f"note {i}"} for i in range(120)])]
        assert first.recall("note 7", k=1).results[0].memory.id == ids[7]
        store_id = first.store.store_id  # type: ignore[attr-defined]
    manifest = folder / store_id / "default.json"
    saved = json.loads(manifest.read_text("utf-8"))
    assert saved["kind"] == "graph" and saved["store_id"] == store_id

    monkeypatch.setenv("SLM_INDEX_DIR", "")
    with fake(dsn=postgres_dsn) as other:  # another server, saving nowhere, writes
        assert other.store.folder is None  # type: ignore[attr-defined]
        late = other.remember("a note written while the first server was away").memory.id
        other.forget(ids[:3])
    assert json.loads(manifest.read_text("utf-8")) == saved

    built: list[str] = []
    build = vector_cache.VectorCache._build

    def counted(self: vector_cache.VectorCache, profile: str) -> Any:
        built.append(self.source.table)
        return build(self, profile)

    monkeypatch.setattr(vector_cache.VectorCache, "_build", counted)
    monkeypatch.setenv("SLM_INDEX_DIR", str(folder))
    with fake(dsn=postgres_dsn) as second:
        found = second.recall("a note written while the first server was away", k=1)
        assert found.results[0].memory.id == late
        assert "embeddings" not in built  # the saved graph, not every row
        _, held = second.indexes.vectors.mean("default")
        assert held == 118  # 120 + 1 - 3

    another = postgres_server.fresh_database()
    try:
        with fake(dsn=another) as empty:
            empty.remember_many([{"content": f"other note {i}"} for i in range(60)])
            other_id = empty.store.store_id  # type: ignore[attr-defined]
        assert other_id != store_id
        shutil.rmtree(folder / other_id, ignore_errors=True)
        shutil.copytree(folder / store_id, folder / other_id)  # another database's files
        built.clear()
        with fake(dsn=another) as reopened:
            assert reopened.recall("other note 4", k=1).results[0].memory.content == "other note 4"
        assert "embeddings" in built  # never trusted: read from its own rows
    finally:
        postgres_server.drop_database(another)


def test_an_index_folder_that_cannot_be_written_loses_nothing(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SLM_INDEX_DIR naming a file, not a folder: the server opens, stores and recalls as
    without it, and the next server builds its indexes from the rows (nothing is lost,
    nothing half-saved is trusted)."""
    monkeypatch.setattr(vector_cache, "EXACT_MAX", 50)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x", "utf-8")
    monkeypatch.setenv("SLM_INDEX_DIR", str(blocker))
    with fake(dsn=postgres_dsn) as first:
        ids = [r.id for r in first.remember_many([{"content": f"note {i}"} for i in range(80)])]
        assert first.recall("note 7", k=1).results[0].memory.id == ids[7]
    with fake(dsn=postgres_dsn) as second:
        assert second.count() == 80
        assert second.recall("note 42", k=1).results[0].memory.id == ids[42]
    assert blocker.read_text("utf-8") == "x"


@pytest.mark.parametrize("planted", ["ABSOLUTE", "../escaped", "a/b", "x" * 32])
def test_a_store_id_that_is_not_an_identity_never_names_a_folder(
    postgres_dsn: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    planted: str,
) -> None:
    """``store_id`` in slm_meta is the database's word: an absolute path there once made
    every server write its index files wherever the database said. Only an identity as slm
    makes it names a folder; any other value is ignored with one warning, the server
    stores and recalls as without a folder, and nothing is written outside it."""
    monkeypatch.setattr(vector_cache, "EXACT_MAX", 50)
    folder, outside = tmp_path / "indexes", tmp_path / "outside"
    outside.mkdir()
    value = str(outside / "planted") if planted == "ABSOLUTE" else planted
    monkeypatch.setenv("SLM_INDEX_DIR", str(folder))
    with fake(dsn=postgres_dsn) as first:
        first.remember("made before the identity was changed")
    sql(postgres_dsn, "postgres", f"UPDATE slm_meta SET value = '{value}' WHERE key = 'store_id'")
    with caplog.at_level(logging.WARNING, logger="slm"), fake(dsn=postgres_dsn) as memory:
        ids = [r.id for r in memory.remember_many([{"content": f"note {i}"} for i in range(120)])]
        assert memory.recall("note 7", k=1).results[0].memory.id == ids[7]
        assert memory.store.folder is None  # type: ignore[attr-defined]
    warned = [r.getMessage() for r in caplog.records if "store_id" in r.getMessage()]
    assert len(warned) == 1
    assert not any(outside.iterdir())
    assert not folder.exists() or not any(folder.iterdir())
    assert not (tmp_path / "escaped").exists()


def test_a_role_that_may_only_read_opens_a_database_without_an_identity(
    postgres_server: Server, postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first server to open a database records its identity; one whose role may only
    read still opens it and recalls, saving no index (it could not name whose it is)."""
    monkeypatch.setenv("SLM_INDEX_DIR", str(tmp_path / "indexes"))
    with fake(dsn=postgres_dsn) as writer:
        noted = writer.remember("the reader may look but not touch").memory.id
    sql(postgres_dsn, "postgres", "DELETE FROM slm_meta WHERE key = 'store_id'")
    role = f"reader_{postgres_dsn.rsplit('_', 1)[1]}"
    postgres_server.admin(f"CREATE ROLE {role} LOGIN")
    try:
        sql(postgres_dsn, "postgres", f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
        reader_dsn = postgres_dsn.replace("postgres@", f"{role}@", 1)
        with fake(dsn=reader_dsn) as reader:
            assert reader.store.folder is None  # type: ignore[attr-defined]
            found = reader.recall("may the reader touch it?", k=1)
            assert found.results[0].memory.id == noted
    finally:
        sql(postgres_dsn, "postgres", f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
        postgres_server.admin(f"DROP ROLE {role}")


def write_notes(dsn: str, worker: int, n: int) -> None:
    """One writer process: its own notes one by one, and now and then a batch of notes
    every writer stores (so the same content arrives from several processes at once)."""
    with fake(dsn=dsn) as memory:
        for i in range(n):
            memory.remember(
                f"worker {worker} wrote note {i}", source=f"w{worker}", metadata={"session": worker}
            )
            if i % 10 == 0:
                memory.remember_many([{"content": f"shared note {j}"} for j in range(i, i + 3)])


def test_four_processes_writing_at_once_lose_nothing(postgres_dsn: str) -> None:
    n, workers = 40, 4
    # Forked, so the writers start at once without importing everything again.
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=write_notes, args=(postgres_dsn, w, n)) for w in range(workers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * workers
    shared = {j for i in range(0, n, 10) for j in range(i, i + 3)}
    with fake(dsn=postgres_dsn) as memory:
        records = memory.list(limit=10_000)
        contents = [r.content for r in records]
        assert len(records) == workers * n + len(shared)
        assert len(set(contents)) == len(contents) and len({r.id for r in records}) == len(records)
        for w in range(workers):
            assert {f"worker {w} wrote note {i}" for i in range(n)} <= set(contents)
        counts = memory.store.index_counts(memory.profile)
        assert counts == dict.fromkeys(counts, len(records))
        assert memory.store.lexical_stats(memory.profile, []).n_docs == len(records)
        turns = sql(postgres_dsn, "postgres", "SELECT count(*) FROM edges WHERE kind = 'next'")
        assert turns == [(workers * (n - 1),)]


def test_a_remember_and_a_recall_each_take_one_connection(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Taking a connection from the pool checks it with a round trip of its own: a write
    (its reads, then its transaction) holds one for all its statements, as a recall does."""
    with fake(dsn=postgres_dsn) as memory:
        for text in CORPUS[:-1]:
            memory.remember(text, source="chat")
        memory.recall("Who paints?")  # the learned ranker's row, read once a minute
        pool = memory.store._pool  # type: ignore[attr-defined]
        taken: list[str] = []
        real = pool.getconn

        def getconn(*args: Any, **kwargs: Any) -> Any:
            taken.append(threading.current_thread().name)
            return real(*args, **kwargs)

        monkeypatch.setattr(pool, "getconn", getconn)
        me = threading.current_thread().name
        memory.remember(CORPUS[-1], source="chat")
        assert taken.count(me) == 1
        memory.remember(CORPUS[-1], source="chat")  # already stored: reads only
        assert taken.count(me) == 2
        assert memory.recall("Who paints the lake?", k=3).results
        assert taken.count(me) == 3
