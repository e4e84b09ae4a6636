"""Schema of the SQLite store as numbered migrations; ``PRAGMA user_version`` counts them.

Each migration runs in one transaction when a store opens. Never edit a released one:
append a new one.

Tables: ``memories`` (the source of truth) and derived, rebuildable ones: ``embeddings``,
``lex_*`` (BM25 inverted index and statistics), ``memory_tags``, ``entities`` and
``mentions`` (entity graph), ``memory_times`` (dates referenced in the text), ``edges``
(memory-memory graph: neighbouring turns and semantic neighbours). ``passages``
holds further vectors of a memory: its passages beyond the first (for texts longer than
the model reads) and its standing statements (migration 7). ``changes`` is the change
feed other processes' in-memory indexes follow (``slm.store.feed``; migration 13, which
replaced the ``forgotten`` log). ``memories.valid_from`` (NULL: the
event time), ``valid_to`` and ``superseded_by`` say when a memory holds; ``fact_slots`` and
``fact_updates`` hold the facts memories state and their probable updates (migration 8,
see ``slm.store.lifecycle``). ``memories.scope`` says who a memory belongs to within its
profile (``slm.models.scope_of``; migration 12): it is filled when a ``Memory`` opens the
store (``Relational.rescope``), and its content hash covers it.

Postings are ordered by impact within a term (term frequency descending, then document
length), so a common term's best postings are read first and the rest never (migration 3).
"""

from __future__ import annotations

from slm.store import fields

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE memories (
        key INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        profile TEXT NOT NULL,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        event_time INTEGER NOT NULL,
        recorded_at INTEGER NOT NULL,
        source TEXT,
        confidence REAL NOT NULL,
        metadata TEXT NOT NULL,
        tags TEXT NOT NULL,
        UNIQUE (profile, content_hash)
    );
    CREATE INDEX memories_event ON memories (profile, event_time);
    CREATE INDEX memories_recorded ON memories (profile, recorded_at, key);
    CREATE INDEX memories_source ON memories (profile, source);
    CREATE TABLE memory_tags (
        profile TEXT NOT NULL, tag TEXT NOT NULL, key INTEGER NOT NULL,
        PRIMARY KEY (profile, tag, key)
    ) WITHOUT ROWID;
    CREATE TABLE embeddings (key INTEGER PRIMARY KEY, profile TEXT NOT NULL, vector BLOB NOT NULL);
    CREATE INDEX embeddings_profile ON embeddings (profile, key);
    CREATE TABLE lex_docs (key INTEGER PRIMARY KEY, profile TEXT NOT NULL, terms TEXT NOT NULL);
    CREATE TABLE lex_postings (
        profile TEXT NOT NULL, term TEXT NOT NULL, key INTEGER NOT NULL,
        tf INTEGER NOT NULL, dl INTEGER NOT NULL,
        PRIMARY KEY (profile, term, key)
    ) WITHOUT ROWID;
    CREATE TABLE lex_terms (
        profile TEXT NOT NULL, term TEXT NOT NULL, df INTEGER NOT NULL,
        PRIMARY KEY (profile, term)
    ) WITHOUT ROWID;
    CREATE TABLE lex_stats (
        profile TEXT PRIMARY KEY, n_docs INTEGER NOT NULL, total_len INTEGER NOT NULL
    );
    CREATE TABLE forgotten (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, profile TEXT NOT NULL, key INTEGER NOT NULL
    );
    CREATE TABLE source_feedback (
        profile TEXT NOT NULL, source TEXT NOT NULL,
        useful INTEGER NOT NULL DEFAULT 0, not_useful INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (profile, source)
    );
    """,
    """
    ALTER TABLE memories ADD COLUMN session TEXT;
    CREATE INDEX memories_session ON memories (profile, session, key);
    CREATE TABLE entities (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        profile TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
        mentions INTEGER NOT NULL DEFAULT 0,
        UNIQUE (profile, name)
    );
    CREATE TABLE mentions (
        entity INTEGER NOT NULL, key INTEGER NOT NULL, speaker INTEGER NOT NULL,
        PRIMARY KEY (entity, key)
    ) WITHOUT ROWID;
    CREATE INDEX mentions_key ON mentions (key);
    CREATE TABLE memory_times (
        key INTEGER NOT NULL, profile TEXT NOT NULL,
        start_us INTEGER NOT NULL, end_us INTEGER NOT NULL
    );
    CREATE INDEX memory_times_key ON memory_times (key);
    CREATE INDEX memory_times_start ON memory_times (profile, start_us);
    CREATE TABLE edges (
        profile TEXT NOT NULL, src INTEGER NOT NULL, dst INTEGER NOT NULL,
        kind TEXT NOT NULL, weight REAL NOT NULL,
        PRIMARY KEY (src, dst, kind)
    ) WITHOUT ROWID;
    CREATE INDEX edges_dst ON edges (dst);
    """,
    """
    CREATE TABLE lex_postings_by_impact (
        profile TEXT NOT NULL, term TEXT NOT NULL, tf INTEGER NOT NULL, dl INTEGER NOT NULL,
        key INTEGER NOT NULL,
        PRIMARY KEY (profile, term, tf DESC, dl, key)
    ) WITHOUT ROWID;
    INSERT INTO lex_postings_by_impact (profile, term, tf, dl, key)
        SELECT profile, term, tf, dl, key FROM lex_postings;
    DROP TABLE lex_postings;
    ALTER TABLE lex_postings_by_impact RENAME TO lex_postings;
    """,
    """
    CREATE INDEX forgotten_profile ON forgotten (profile, seq);
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
        key INTEGER PRIMARY KEY, memory INTEGER NOT NULL, profile TEXT NOT NULL,
        kind TEXT NOT NULL, text TEXT, vector BLOB NOT NULL
    );
    CREATE INDEX passages_profile ON passages (profile, kind, key);
    CREATE INDEX passages_memory ON passages (memory);
    """,
    """
    ALTER TABLE memories ADD COLUMN valid_from INTEGER;
    ALTER TABLE memories ADD COLUMN valid_to INTEGER;
    ALTER TABLE memories ADD COLUMN superseded_by TEXT;
    CREATE INDEX memories_superseded ON memories (profile, valid_to) WHERE valid_to IS NOT NULL;
    CREATE TABLE fact_slots (
        key INTEGER NOT NULL,
        profile TEXT NOT NULL,
        slot TEXT NOT NULL,
        value TEXT NOT NULL,
        valid_from INTEGER NOT NULL,
        PRIMARY KEY (key, slot)
    );
    CREATE INDEX fact_slots_slot ON fact_slots (profile, slot, valid_from);
    CREATE TABLE fact_updates (
        older INTEGER NOT NULL,
        newer INTEGER NOT NULL,
        profile TEXT NOT NULL,
        slot TEXT NOT NULL,
        PRIMARY KEY (older, newer, slot)
    );
    CREATE INDEX fact_updates_newer ON fact_updates (newer);
    CREATE INDEX fact_updates_slot ON fact_updates (profile, slot);
    """,
    """
    CREATE TABLE recall_log (
        profile TEXT NOT NULL, query_id TEXT NOT NULL, created_at INTEGER NOT NULL,
        request TEXT NOT NULL, shown TEXT NOT NULL, example BLOB,
        PRIMARY KEY (profile, query_id)
    );
    CREATE INDEX recall_log_time ON recall_log (profile, created_at);
    CREATE TABLE feedback (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, profile TEXT NOT NULL, query_id TEXT,
        memory_id TEXT NOT NULL, useful INTEGER NOT NULL, created_at INTEGER NOT NULL
    );
    CREATE INDEX feedback_profile ON feedback (profile, seq);
    CREATE INDEX feedback_query ON feedback (profile, query_id, memory_id);
    CREATE INDEX feedback_memory ON feedback (profile, memory_id);
    """,
    """
    CREATE TABLE fact_dismissed (
        older INTEGER NOT NULL,
        newer INTEGER NOT NULL,
        profile TEXT NOT NULL,
        PRIMARY KEY (older, newer)
    );
    CREATE INDEX fact_dismissed_newer ON fact_dismissed (newer);
    """,
    fields.SCHEMA.format(key_type="INTEGER"),
    """
    ALTER TABLE memories ADD COLUMN scope TEXT NOT NULL DEFAULT '';
    CREATE INDEX memories_scope ON memories (profile, scope, key);
    """,
    """
    CREATE TABLE changes (
        profile TEXT NOT NULL, seq INTEGER NOT NULL,
        written TEXT NOT NULL, forgotten TEXT NOT NULL, rederived INTEGER NOT NULL,
        PRIMARY KEY (profile, seq)
    ) WITHOUT ROWID;
    DROP TABLE IF EXISTS forgotten;
    """,
)

#: Work a migration needs besides its statements, by its index in ``MIGRATIONS``.
AFTER_MIGRATION = {10: fields.backfill}
