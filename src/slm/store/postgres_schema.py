"""Schema of the PostgreSQL store as numbered migrations, counted in ``slm_schema``.

The tables mirror the SQLite store's (see :mod:`slm.store.sqlite_schema`), so both keep
the same derived data and the same BM25 statistics; the differences are PostgreSQL's own:

- ``embeddings.vector`` is a pgvector ``vector(dim)`` with an HNSW index
  (``vector_cosine_ops``); ``dim`` is fixed when the schema is created.
- ``memories.tags`` is a ``text[]`` with a GIN index instead of a ``memory_tags`` table.
- every derived table carries ``profile`` (so every read can filter on it), and text that
  is compared by range (entity names, terms) uses the ``"C"`` collation: byte order, as in
  SQLite, whatever the server's locale.
- ``passages`` (a memory's further passages and standing statements) has a partial HNSW
  index over the passages.
- ``changes``, the change feed (``slm.store.feed``), is the same table: each server's
  in-memory indexes follow it.

Times are microseconds since the epoch (``bigint``) exactly as in SQLite, so copies
between the stores are exact. Each migration runs in one transaction under an advisory
lock (see :func:`migrate`). Never edit a released one: append.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from slm.errors import ConfigError
from slm.store import fields

#: Advisory lock key (bigint) held while migrating.
MIGRATION_LOCK = 0x736C6D5F6D6967

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE slm_meta (key text PRIMARY KEY, value text NOT NULL);
    CREATE TABLE memories (
        key bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id text NOT NULL UNIQUE,
        profile text NOT NULL,
        content text NOT NULL,
        content_hash text NOT NULL,
        event_time bigint NOT NULL,
        recorded_at bigint NOT NULL,
        source text,
        confidence double precision NOT NULL,
        metadata text NOT NULL,
        tags text[] NOT NULL,
        session text,
        UNIQUE (profile, content_hash)
    );
    CREATE INDEX memories_profile ON memories (profile, key);
    CREATE INDEX memories_event ON memories (profile, event_time, key);
    CREATE INDEX memories_recorded ON memories (profile, recorded_at, key);
    CREATE INDEX memories_source ON memories (profile, source, key);
    CREATE INDEX memories_session ON memories (profile, session, key);
    CREATE INDEX memories_tags ON memories USING gin (tags);
    CREATE TABLE embeddings (
        key bigint PRIMARY KEY, profile text NOT NULL, vector vector({dim}) NOT NULL
    );
    CREATE INDEX embeddings_profile ON embeddings (profile, key);
    CREATE INDEX embeddings_hnsw ON embeddings USING hnsw (vector vector_cosine_ops);
    CREATE TABLE lex_docs (key bigint PRIMARY KEY, profile text NOT NULL, terms text NOT NULL);
    CREATE INDEX lex_docs_profile ON lex_docs (profile, key);
    CREATE TABLE lex_postings (
        profile text NOT NULL, term text COLLATE "C" NOT NULL, key bigint NOT NULL,
        tf integer NOT NULL, dl integer NOT NULL,
        PRIMARY KEY (profile, term, key)
    );
    CREATE TABLE lex_terms (
        profile text NOT NULL, term text COLLATE "C" NOT NULL, df integer NOT NULL,
        PRIMARY KEY (profile, term)
    );
    CREATE TABLE lex_stats (
        profile text PRIMARY KEY, n_docs bigint NOT NULL, total_len bigint NOT NULL
    );
    CREATE TABLE source_feedback (
        profile text NOT NULL, source text NOT NULL,
        useful integer NOT NULL DEFAULT 0, not_useful integer NOT NULL DEFAULT 0,
        PRIMARY KEY (profile, source)
    );
    CREATE TABLE entities (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        profile text NOT NULL, name text COLLATE "C" NOT NULL, kind text NOT NULL,
        mentions integer NOT NULL DEFAULT 0,
        UNIQUE (profile, name)
    );
    CREATE TABLE mentions (
        profile text NOT NULL, entity bigint NOT NULL, key bigint NOT NULL,
        speaker smallint NOT NULL,
        PRIMARY KEY (entity, key)
    );
    CREATE INDEX mentions_key ON mentions (key);
    CREATE TABLE memory_times (
        key bigint NOT NULL, profile text NOT NULL,
        start_us bigint NOT NULL, end_us bigint NOT NULL
    );
    CREATE INDEX memory_times_key ON memory_times (key);
    CREATE INDEX memory_times_start ON memory_times (profile, start_us);
    CREATE TABLE edges (
        profile text NOT NULL, src bigint NOT NULL, dst bigint NOT NULL,
        kind text NOT NULL, weight double precision NOT NULL,
        PRIMARY KEY (src, dst, kind)
    );
    CREATE INDEX edges_dst ON edges (dst);
    """,
    """
    CREATE TABLE vector_sums (
        profile text PRIMARY KEY, n bigint NOT NULL, total double precision[] NOT NULL
    );
    INSERT INTO vector_sums (profile, n, total)
        SELECT profile, count(*), avg(vector)::real[]::double precision[]
        FROM embeddings GROUP BY profile;
    UPDATE vector_sums s SET total = ARRAY(SELECT x * s.n FROM unnest(s.total) AS x);
    """,
    """
    CREATE INDEX lex_postings_impact ON lex_postings (profile, term, tf DESC, dl, key);
    """,
    """
    CREATE INDEX memory_times_long ON memory_times (profile, start_us)
        WHERE end_us - start_us > 5356800000000;
    """,
    """
    CREATE INDEX mentions_speaker ON mentions (entity) WHERE speaker = 1;
    """,
    """
    CREATE TABLE passages (
        key bigint PRIMARY KEY, memory bigint NOT NULL, profile text NOT NULL,
        kind text NOT NULL, text text, vector vector({dim}) NOT NULL
    );
    CREATE INDEX passages_memory ON passages (profile, memory);
    CREATE INDEX passages_standing ON passages (profile) WHERE kind <> 'passage';
    CREATE INDEX passages_hnsw ON passages USING hnsw (vector vector_cosine_ops)
        WHERE kind = 'passage';
    """,
    """
    ALTER TABLE memories ADD COLUMN valid_from bigint;
    ALTER TABLE memories ADD COLUMN valid_to bigint;
    ALTER TABLE memories ADD COLUMN superseded_by text;
    CREATE INDEX memories_superseded ON memories (profile, valid_to) WHERE valid_to IS NOT NULL;
    CREATE TABLE fact_slots (
        key bigint NOT NULL,
        profile text NOT NULL,
        slot text NOT NULL,
        value text NOT NULL,
        valid_from bigint NOT NULL,
        PRIMARY KEY (key, slot)
    );
    CREATE INDEX fact_slots_slot ON fact_slots (profile, slot, valid_from);
    CREATE TABLE fact_updates (
        older bigint NOT NULL,
        newer bigint NOT NULL,
        profile text NOT NULL,
        slot text NOT NULL,
        PRIMARY KEY (older, newer, slot)
    );
    CREATE INDEX fact_updates_newer ON fact_updates (newer);
    CREATE INDEX fact_updates_slot ON fact_updates (profile, slot);
    """,
    """
    CREATE TABLE recall_log (
        profile text NOT NULL, query_id text NOT NULL, created_at bigint NOT NULL,
        request text NOT NULL, shown text NOT NULL, example bytea,
        PRIMARY KEY (profile, query_id)
    );
    CREATE INDEX recall_log_time ON recall_log (profile, created_at);
    CREATE TABLE feedback (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, profile text NOT NULL,
        query_id text, memory_id text NOT NULL, useful smallint NOT NULL,
        created_at bigint NOT NULL
    );
    CREATE INDEX feedback_profile ON feedback (profile, seq);
    CREATE INDEX feedback_query ON feedback (profile, query_id, memory_id);
    CREATE INDEX feedback_memory ON feedback (profile, memory_id);
    """,
    """
    CREATE TABLE fact_dismissed (
        older bigint NOT NULL,
        newer bigint NOT NULL,
        profile text NOT NULL,
        PRIMARY KEY (older, newer)
    );
    CREATE INDEX fact_dismissed_newer ON fact_dismissed (newer);
    """,
    fields.SCHEMA.format(key_type="bigint"),
    """
    ALTER TABLE memories ADD COLUMN scope text NOT NULL DEFAULT '';
    CREATE INDEX memories_scope ON memories (profile, scope, key);
    """,
    """
    CREATE TABLE changes (
        profile text NOT NULL, seq bigint NOT NULL,
        written text NOT NULL, forgotten text NOT NULL, rederived boolean NOT NULL,
        PRIMARY KEY (profile, seq)
    );
    """,
)
#: The migration after which the metadata fields index is filled from stored memories.
_FIELDS = 9


def migrate(conn: Connection[Any], dim: int) -> None:
    """Bring the schema up to date. Safe when several clients connect at once: the
    migrations run in one transaction under an advisory lock, and the version is read
    again once the lock is held."""
    if _schema_version(conn) < len(MIGRATIONS):
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute("CREATE TABLE IF NOT EXISTS slm_schema (version integer NOT NULL)")
            for number in range(_schema_version(conn), len(MIGRATIONS)):
                conn.execute(MIGRATIONS[number].replace("{dim}", str(int(dim))).encode())
                if number == _FIELDS:
                    fields.backfill(conn.cursor(), "%s")
                conn.execute("INSERT INTO slm_schema (version) VALUES (%s)", (number + 1,))
    row = conn.execute(
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'embeddings'::regclass "
        "AND attname = 'vector'"
    ).fetchone()
    if row is None or row[0] != dim:
        stored = row[0] if row else "unknown"
        raise ConfigError(f"this store holds vectors of dimension {stored}, not {dim}")


def _schema_version(conn: Connection[Any]) -> int:
    row = conn.execute("SELECT to_regclass('slm_schema') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM slm_schema").fetchone()
    return int(row[0]) if row else 0
