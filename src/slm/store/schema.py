"""The schema of the relational stores, written once: numbered migrations applied in
order when a store opens (SQLite counts them in ``PRAGMA user_version``, PostgreSQL in its
``slm_schema`` table). Never edit a released migration: append one to :data:`MIGRATIONS`.

A migration's SQL names its types by placeholders that :data:`TYPES` fills in for each
database (``{bigint}``: SQLite's ``INTEGER``, PostgreSQL's ``bigint``), then adds what each
database does its own way. A database counts the migrations it runs a statement of.

Tables: ``memories`` (the source of truth) and derived, rebuildable ones: ``embeddings``,
``lex_*`` (BM25 inverted index and statistics), ``entities`` and ``mentions`` (entity
graph), ``memory_times`` (dates referenced in the text), ``edges`` (neighbouring turns and
semantic neighbours), ``passages`` (a memory's further vectors: its passages beyond the
first, for texts longer than the model reads, and its standing statements),
``memory_fields`` (:mod:`slm.store.fields`). ``unfinished`` names the memories a write of
several parts (a long conversation, an import) created and may still take away: a write told
that one exists claims it, removing its row (:mod:`slm.store.unfinished`).
``memories.valid_from`` (NULL: the event time), ``valid_to`` and ``superseded_by`` say
when a memory holds; ``fact_*`` hold the facts memories state and their probable updates
(:mod:`slm.store.lifecycle`); ``recall_log``, ``feedback`` and ``source_feedback`` what use
teaches (:mod:`slm.store.feedback`). ``memories.scope`` says who a memory belongs to within its
profile (``slm.models.scope_of``; filled by ``Relational.rescope``), and its content hash
covers it. Times are microseconds since the epoch, so copies between stores are exact.

Where the databases differ:

- SQLite keeps tags in ``memory_tags`` (and logged removed keys in ``forgotten``, until
  the change feed ``changes`` replaced it: :mod:`slm.store.feed`); PostgreSQL keeps tags
  in ``memories.tags`` (``text[]``, GIN index), and kept each profile's vector sum in
  ``vector_sums`` until the vectors were searched in process.
- PostgreSQL's vectors are pgvector ``vector(dim)`` columns (``dim`` fixed when the schema
  is created), which had HNSW indexes until each server searched its own (the change feed's
  migration dropped them).
- SQLite stores the lexical and graph tables in primary-key order (``WITHOUT ROWID``), a
  term's postings by impact (term frequency descending, then document length: a common
  term's best postings are read first and the rest never); PostgreSQL indexes them so.
- PostgreSQL's ``mentions`` carry ``profile`` (every read can filter on it), and text
  compared by range (entity names, terms) sorts in byte order (``COLLATE "C"``), as in
  SQLite, whatever the server's locale.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from slm.store import fields
from slm.store.base import Cursor
from slm.store.dialect import Dialect

#: The databases, in the order of :data:`TYPES`' columns.
DATABASES = ("sqlite", "postgres")
#: Each database's SQL for the placeholders of the migrations (``{dim}``: the vectors'
#: dimension); ``{meta}`` is the dialect's table of store-wide settings.
TYPES: dict[str, tuple[str, str]] = {
    "serial": (
        "INTEGER PRIMARY KEY AUTOINCREMENT",
        "bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    ),
    "bigint": ("INTEGER", "bigint"),
    "smallint": ("INTEGER", "smallint"),
    "double": ("REAL", "double precision"),
    "bytes": ("BLOB", "bytea"),
    "vector": ("BLOB", "vector({dim})"),
    "tags": ("TEXT", "text[]"),
    "sorted": ("TEXT", 'text COLLATE "C"'),  # text compared by range: in byte order
    "clustered": (" WITHOUT ROWID", ""),  # after a table kept in primary-key order
}


@dataclass(frozen=True)
class Migration:
    """One numbered change: ``both`` databases' statements, then each one's own; ``after``
    runs once they have (given the cursor and the driver's parameter mark)."""

    both: str = ""
    sqlite: str = ""
    postgres: str = ""
    after: tuple[Callable[[Cursor, str], None], ...] = ()
    #: the databases that numbered this migration and the next as one
    with_next: tuple[str, ...] = ()

    def statements(self, database: str, names: Mapping[str, str]) -> tuple[str, ...]:
        """The statements ``database`` runs, their placeholders filled from ``names``."""
        own = {"sqlite": self.sqlite, "postgres": self.postgres}[database]
        sql = f"{self.both};{own}".format_map(names)
        return tuple(statement.strip() for statement in sql.split(";") if statement.strip())


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        """
        CREATE TABLE {meta} (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE memories (
            key {serial}, id TEXT NOT NULL UNIQUE, profile TEXT NOT NULL,
            content TEXT NOT NULL, content_hash TEXT NOT NULL,
            event_time {bigint} NOT NULL, recorded_at {bigint} NOT NULL, source TEXT,
            confidence {double} NOT NULL, metadata TEXT NOT NULL, tags {tags} NOT NULL,
            UNIQUE (profile, content_hash)
        );
        CREATE INDEX memories_recorded ON memories (profile, recorded_at, key);
        CREATE TABLE embeddings (
            key {bigint} PRIMARY KEY, profile TEXT NOT NULL, vector {vector} NOT NULL
        );
        CREATE INDEX embeddings_profile ON embeddings (profile, key);
        CREATE TABLE lex_docs (
            key {bigint} PRIMARY KEY, profile TEXT NOT NULL, terms TEXT NOT NULL
        );
        CREATE TABLE lex_postings (
            profile TEXT NOT NULL, term {sorted} NOT NULL, key {bigint} NOT NULL,
            tf INTEGER NOT NULL, dl INTEGER NOT NULL,
            PRIMARY KEY (profile, term, key)
        ){clustered};
        CREATE TABLE lex_terms (
            profile TEXT NOT NULL, term {sorted} NOT NULL, df INTEGER NOT NULL,
            PRIMARY KEY (profile, term)
        ){clustered};
        CREATE TABLE lex_stats (
            profile TEXT PRIMARY KEY, n_docs {bigint} NOT NULL, total_len {bigint} NOT NULL
        );
        CREATE TABLE source_feedback (
            profile TEXT NOT NULL, source TEXT NOT NULL,
            useful INTEGER NOT NULL DEFAULT 0, not_useful INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (profile, source)
        );
        """,
        sqlite="""
        CREATE INDEX memories_event ON memories (profile, event_time);
        CREATE INDEX memories_source ON memories (profile, source);
        CREATE TABLE memory_tags (
            profile TEXT NOT NULL, tag TEXT NOT NULL, key INTEGER NOT NULL,
            PRIMARY KEY (profile, tag, key)
        ) WITHOUT ROWID;
        CREATE TABLE forgotten (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, profile TEXT NOT NULL, key INTEGER NOT NULL
        );
        """,
        postgres="""
        CREATE INDEX memories_profile ON memories (profile, key);
        CREATE INDEX memories_event ON memories (profile, event_time, key);
        CREATE INDEX memories_source ON memories (profile, source, key);
        CREATE INDEX memories_tags ON memories USING gin (tags);
        CREATE INDEX embeddings_hnsw ON embeddings USING hnsw (vector vector_cosine_ops);
        CREATE INDEX lex_docs_profile ON lex_docs (profile, key);
        """,
        with_next=("postgres",),
    ),
    Migration(
        """
        ALTER TABLE memories ADD COLUMN session TEXT;
        CREATE INDEX memories_session ON memories (profile, session, key);
        CREATE TABLE entities (
            id {serial},
            profile TEXT NOT NULL, name {sorted} NOT NULL, kind TEXT NOT NULL,
            mentions INTEGER NOT NULL DEFAULT 0,
            UNIQUE (profile, name)
        );
        CREATE TABLE memory_times (
            key {bigint} NOT NULL, profile TEXT NOT NULL,
            start_us {bigint} NOT NULL, end_us {bigint} NOT NULL
        );
        CREATE INDEX memory_times_key ON memory_times (key);
        CREATE INDEX memory_times_start ON memory_times (profile, start_us);
        CREATE TABLE edges (
            profile TEXT NOT NULL, src {bigint} NOT NULL, dst {bigint} NOT NULL,
            kind TEXT NOT NULL, weight {double} NOT NULL,
            PRIMARY KEY (src, dst, kind)
        ){clustered};
        CREATE INDEX edges_dst ON edges (dst);
        """,
        sqlite="""
        CREATE TABLE mentions (
            entity INTEGER NOT NULL, key INTEGER NOT NULL, speaker INTEGER NOT NULL,
            PRIMARY KEY (entity, key)
        ) WITHOUT ROWID;
        CREATE INDEX mentions_key ON mentions (key);
        """,
        postgres="""
        CREATE TABLE mentions (
            profile text NOT NULL, entity bigint NOT NULL, key bigint NOT NULL,
            speaker smallint NOT NULL,
            PRIMARY KEY (entity, key)
        );
        CREATE INDEX mentions_key ON mentions (key);
        """,
    ),
    Migration(
        postgres="""
        CREATE TABLE vector_sums (
            profile text PRIMARY KEY, n bigint NOT NULL, total double precision[] NOT NULL
        );
        INSERT INTO vector_sums (profile, n, total)
            SELECT profile, count(*), avg(vector)::real[]::double precision[]
            FROM embeddings GROUP BY profile;
        UPDATE vector_sums s SET total = ARRAY(SELECT x * s.n FROM unnest(s.total) AS x);
        """
    ),
    Migration(
        sqlite="""
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
        postgres="""
        CREATE INDEX lex_postings_impact ON lex_postings (profile, term, tf DESC, dl, key);
        """,
    ),
    Migration(sqlite="CREATE INDEX forgotten_profile ON forgotten (profile, seq);"),
    Migration(
        """
        CREATE INDEX memory_times_long ON memory_times (profile, start_us)
            WHERE end_us - start_us > 5356800000000;
        """
    ),
    Migration("CREATE INDEX mentions_speaker ON mentions (entity) WHERE speaker = 1;"),
    Migration(
        """
        CREATE TABLE passages (
            key {bigint} PRIMARY KEY, memory {bigint} NOT NULL, profile TEXT NOT NULL,
            kind TEXT NOT NULL, text TEXT, vector {vector} NOT NULL
        );
        """,
        sqlite="""
        CREATE INDEX passages_profile ON passages (profile, kind, key);
        CREATE INDEX passages_memory ON passages (memory);
        """,
        postgres="""
        CREATE INDEX passages_memory ON passages (profile, memory);
        CREATE INDEX passages_standing ON passages (profile) WHERE kind <> 'passage';
        CREATE INDEX passages_hnsw ON passages USING hnsw (vector vector_cosine_ops)
            WHERE kind = 'passage';
        """,
    ),
    Migration(
        """
        ALTER TABLE memories ADD COLUMN valid_from {bigint};
        ALTER TABLE memories ADD COLUMN valid_to {bigint};
        ALTER TABLE memories ADD COLUMN superseded_by TEXT;
        CREATE INDEX memories_superseded ON memories (profile, valid_to)
            WHERE valid_to IS NOT NULL;
        CREATE TABLE fact_slots (
            key {bigint} NOT NULL, profile TEXT NOT NULL, slot TEXT NOT NULL,
            value TEXT NOT NULL, valid_from {bigint} NOT NULL,
            PRIMARY KEY (key, slot)
        );
        CREATE INDEX fact_slots_slot ON fact_slots (profile, slot, valid_from);
        CREATE TABLE fact_updates (
            older {bigint} NOT NULL, newer {bigint} NOT NULL, profile TEXT NOT NULL,
            slot TEXT NOT NULL,
            PRIMARY KEY (older, newer, slot)
        );
        CREATE INDEX fact_updates_newer ON fact_updates (newer);
        CREATE INDEX fact_updates_slot ON fact_updates (profile, slot);
        """
    ),
    Migration(
        """
        CREATE TABLE recall_log (
            profile TEXT NOT NULL, query_id TEXT NOT NULL, created_at {bigint} NOT NULL,
            request TEXT NOT NULL, shown TEXT NOT NULL, example {bytes},
            PRIMARY KEY (profile, query_id)
        );
        CREATE INDEX recall_log_time ON recall_log (profile, created_at);
        CREATE TABLE feedback (
            seq {serial}, profile TEXT NOT NULL, query_id TEXT,
            memory_id TEXT NOT NULL, useful {smallint} NOT NULL, created_at {bigint} NOT NULL
        );
        CREATE INDEX feedback_profile ON feedback (profile, seq);
        CREATE INDEX feedback_query ON feedback (profile, query_id, memory_id);
        CREATE INDEX feedback_memory ON feedback (profile, memory_id);
        """
    ),
    Migration(
        """
        CREATE TABLE fact_dismissed (
            older {bigint} NOT NULL, newer {bigint} NOT NULL, profile TEXT NOT NULL,
            PRIMARY KEY (older, newer)
        );
        CREATE INDEX fact_dismissed_newer ON fact_dismissed (newer);
        """
    ),
    Migration(
        """
        CREATE TABLE memory_fields (
            key {bigint} NOT NULL, profile TEXT NOT NULL, name TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (key, name)
        );
        CREATE INDEX memory_fields_value ON memory_fields (profile, name, value);
        """,
        after=(fields.backfill,),
    ),
    Migration(
        """
        ALTER TABLE memories ADD COLUMN scope TEXT NOT NULL DEFAULT '';
        CREATE INDEX memories_scope ON memories (profile, scope, key);
        """
    ),
    Migration(
        """
        CREATE TABLE changes (
            profile TEXT NOT NULL, seq {bigint} NOT NULL,
            written TEXT NOT NULL, forgotten TEXT NOT NULL, rederived {smallint} NOT NULL,
            PRIMARY KEY (profile, seq)
        ){clustered};
        """,
        sqlite="DROP TABLE IF EXISTS forgotten;",
        # vectors are searched in each server's process (slm.index): what kept the
        # server's own search goes
        postgres="""
        DROP INDEX IF EXISTS embeddings_hnsw;
        DROP INDEX IF EXISTS passages_hnsw;
        DROP TABLE IF EXISTS vector_sums;
        """,
    ),
    Migration(
        """
        CREATE TABLE unfinished (
            profile TEXT NOT NULL, id TEXT NOT NULL,
            PRIMARY KEY (profile, id)
        );
        """
    ),
)


@dataclass(frozen=True)
class Version:
    """One numbered migration of one database: its statements and the work after them."""

    statements: tuple[str, ...]
    after: tuple[Callable[[Cursor, str], None], ...]

    def apply(self, cur: Cursor, mark: str) -> None:
        for statement in self.statements:
            cur.execute(statement)
        for work in self.after:
            work(cur, mark)


def versions(dialect: Dialect, dim: int) -> list[Version]:
    """The dialect's migrations in order, rendered: version ``n`` is ``versions[n - 1]``."""
    column = DATABASES.index(dialect.name)
    names = {name: sql[column].format(dim=int(dim)) for name, sql in TYPES.items()}
    names["meta"] = dialect.meta_table
    found: list[Version] = []
    pending = Version((), ())
    for migration in MIGRATIONS:
        statements = migration.statements(dialect.name, names)
        if statements:
            pending = Version(pending.statements + statements, pending.after + migration.after)
            if dialect.name not in migration.with_next:
                found.append(pending)
                pending = Version((), ())
    return found


def upgrade(cur: Cursor, dialect: Dialect, dim: int, applied: int, record: str) -> None:
    """Apply the dialect's migrations after the first ``applied``, in the caller's
    transaction, each followed by the statement ``record`` with its ``{number}``."""
    for number, version in enumerate(versions(dialect, dim)[applied:], start=applied + 1):
        version.apply(cur, dialect.mark)
        cur.execute(record.format(number=number))
