"""The store, written once over a dialect.

:class:`Relational` is the base of both stores and holds every method of the
:class:`~slm.store.base.Store` protocol: the SQL is written here, in
:mod:`slm.store.derived` (the rows a memory derives) and in the shared modules
(:mod:`slm.store.sql`, :mod:`slm.store.lifecycle`, :mod:`slm.store.feedback`), and what the
two databases do differently is their :class:`~slm.store.dialect.Dialect`. A store supplies
its connection (:meth:`select`, :meth:`_read`, :meth:`snapshot`, :meth:`_commit`) and how a
memory's row and vector are written (:meth:`_insert_memories`, :meth:`_insert_vectors`,
:meth:`_delete_vectors`). What is held in process beside it (:mod:`slm.index`) follows it
through its change feed and :meth:`version`, which counts this process's writes.
"""

from __future__ import annotations

import functools
import json
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

from slm.errors import ConfigError, StoreError
from slm.models import MemoryRecord, NewMemory, content_hash, from_micros, scope_of
from slm.store import derived, feed, feedback, fields, forgetting, lifecycle, sql, unfinished
from slm.store.base import (
    SCOPE_KEYS_META,
    Cursor,
    Filters,
    LexicalStats,
    Postings,
    Stored,
    Vector,
)
from slm.store.dialect import Dialect
from slm.store.readcache import POSTINGS_LIMIT, Kept, ReadCache

T = TypeVar("T")
K = TypeVar("K", int, str)

#: What storing new memories leaves as it was of the memories already stored, by read-cache
#: kind: their rows (unless the new ones supersede), terms, times and mentions. Entities'
#: counts and members, updates and versions are read again.
STORED_KEEPS = frozenset({"records", "terms", "event_times", "times", "mentions"})


class Relational(unfinished.Unfinished, ABC):
    """What both stores do alike (see the module docstring)."""

    dialect: ClassVar[Dialect]

    _allowed: fields.AllowedKeys
    #: which database (``"sqlite"``, ``"postgres"``) and where, as health reports them
    kind: str
    location: str
    #: the dimension of the stored vectors
    dim: int
    #: where what is derived from the rows may be saved beside them (None: nowhere), and
    #: this database's identity, which what is saved there must match
    folder: Path | None = None
    store_id: str = ""
    #: commits of this process that changed a profile's rows (see :meth:`version`)
    _commits: int = 0

    @property
    def mark(self) -> str:
        return self.dialect.mark

    #: per-memory rows kept between recalls (a store that can follow others' commits
    #: sets a :class:`ReadCache`)
    cache: ReadCache = ReadCache(None)

    @functools.cached_property
    def feedback(self) -> feedback.RelationalFeedback:
        return feedback.RelationalFeedback(self)

    @functools.cached_property
    def versions(self) -> lifecycle.RelationalVersions:
        return lifecycle.RelationalVersions(self)

    @functools.cached_property
    def recorder(self) -> feed.Recorder:
        """What the write under way changed, appended to the change feed as it commits."""
        return feed.Recorder(self.mark)

    def reading(self, profile: str) -> AbstractContextManager[None]:
        """One recall's reads: other processes' commits checked once (the read cache pinned)."""
        return self.cache.pinned(profile)

    def writing(self, profile: str) -> AbstractContextManager[None]:
        """One write's statements to ``profile`` on one connection (with one, nothing to do)."""
        return nullcontext()

    def feed_head(self, profile: str) -> int:
        """The profile's last change's sequence number (:mod:`slm.store.feed`)."""
        return feed.head(self.select, self.mark, profile)

    def changes_since(self, profile: str, seq: int, limit: int = 10_000) -> list[feed.Change]:
        """The profile's changes after ``seq``, in order: the one way to learn what changed."""
        return feed.since(self.select, self.mark, profile, seq, limit)

    def version(self, profile: str) -> int:
        """A number that changes whenever ``profile`` may have changed, by which what is kept
        beside the store knows when to read the feed: the read cache's version (pinned per
        recall by :meth:`reading`) plus this process's own commits."""
        return self.cache.version(profile) + self._commits

    def change(
        self,
        profile: str | None,
        work: Callable[[Cursor], T],
        *,
        lasting: bool = True,
        kept: Kept | None = None,
    ) -> T:
        """``work`` in one write transaction. One that changes memories or what derives from
        them names its ``profile`` (whose write lock it holds, and whose change feed records
        it); feedback, the recall log and settings pass None. Not ``lasting`` (the recall
        log): committed without waiting for the disk, so a power cut may lose the last few.
        ``kept``: what it leaves valid in the read cache once committed (else nothing)."""
        if profile is None:  # nothing the read cache keeps or the feed records
            return self._commit(None, work, lasting)
        committed = False
        try:
            result = self._commit(profile, self.recorder.wrap(profile, work), lasting)
            committed = True
            return result
        finally:
            self.cache.clear(kept if committed else None)
            self._commits += 1

    # -- what a store supplies ------------------------------------------------------------

    @abstractmethod
    def select(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one statement."""

    @abstractmethod
    def _read(self, work: Callable[[Cursor], T]) -> T:
        """``work`` with a cursor for reading."""

    @abstractmethod
    def snapshot(self, work: Callable[[Cursor], T]) -> T:
        """``work`` with a cursor whose statements all see one commit (one read
        transaction): what an index reads to catch up with the change feed."""

    @abstractmethod
    def read_vectors(self, sql: str, params: Sequence[Any]) -> tuple[list[int], Vector]:
        """The (key, vector) rows of ``sql``: their keys and their vectors as a matrix."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def _commit(self, profile: str | None, work: Callable[[Cursor], T], lasting: bool) -> T:
        """``work`` in one write transaction, holding ``profile``'s lock (:meth:`change`)."""

    @abstractmethod
    def _health(self) -> dict[str, Any]:
        """What the database reports of itself beyond kind and location (a query that
        fails raises :class:`StoreError`)."""

    @abstractmethod
    def _insert_memories(
        self, cur: Cursor, profile: str, items: Sequence[NewMemory]
    ) -> list[tuple[str, int]]:
        """Insert the rows of new memories; their (id, key), in the order of ``items``."""

    @abstractmethod
    def _insert_vectors(
        self, cur: Cursor, profile: str, fresh: Sequence[tuple[int, NewMemory]]
    ) -> None:
        """Store the vectors of memories just inserted (and what the store keeps with them)."""

    @abstractmethod
    def _delete_vectors(self, cur: Cursor, profile: str, keys: Sequence[int]) -> None:
        """Remove the vectors of memories being deleted."""

    # -- helpers --------------------------------------------------------------------------

    def select_in(self, head: str, profile: str, values: Iterable[Any]) -> list[Any]:
        """The rows of ``head IN (values)`` for one profile (see :meth:`Dialect.rows_in`):
        ``head`` is a statement whose first parameter is the profile and which ends with
        the column the values are matched against."""
        return self._read(lambda cur: self.dialect.rows_in(cur, head, [profile], values))

    def _grouped(self, head: str, profile: str, keys: Iterable[int]) -> dict[int, list[Any]]:
        """The rows of :meth:`select_in` grouped by their first column, the rest as tuples."""
        out: dict[int, list[Any]] = defaultdict(list)
        for row in self.select_in(head, profile, keys):
            out[row[0]].append(tuple(row[1:]))
        return dict(out)

    def _sorted_groups(
        self, kind: str, head: str, profile: str, keys: Iterable[int]
    ) -> dict[int, tuple[Any, ...]]:
        """:meth:`_grouped`, each group sorted, through the read cache as ``kind`` (as
        tuples: what the cache keeps is shared, and immutable values of immutable values
        are not tracked by the garbage collector, whose full passes otherwise scan them all)."""

        def fetch(missing: list[int]) -> dict[int, tuple[Any, ...]]:
            return {k: tuple(sorted(v)) for k, v in self._grouped(head, profile, missing).items()}

        return self.cache.keyed(kind, profile, keys, fetch)

    def _pairs(self, kind: str, head: str, profile: str, keys: Iterable[K]) -> dict[K, Any]:
        """The two columns of :meth:`select_in`'s rows as a mapping, read-cached as ``kind``."""
        return self.cache.keyed(
            kind, profile, keys, lambda ks: dict(self.select_in(head, profile, ks))
        )

    def _record(self, row: Sequence[Any]) -> MemoryRecord:
        key, id_, content, event_time, recorded_at, source, confidence, metadata, tags = row[:9]
        return MemoryRecord(
            id=id_,
            content=content,
            event_time=from_micros(event_time),
            recorded_at=from_micros(recorded_at),
            source=source,
            confidence=confidence,
            metadata=json.loads(metadata),
            tags=self.dialect.tags(tags),
            key=key,
            **sql.record_times(row),
        )

    def _memories(self, profile: str, column: str, values: Iterable[Any]) -> list[MemoryRecord]:
        head = (
            f"SELECT {sql.MEMORY_COLUMNS} FROM memories "
            f"WHERE {self.dialect.by_key}profile = {self.mark} AND {column}"
        )
        return [self._record(row) for row in self.select_in(head, profile, values)]

    # -- store-wide settings --------------------------------------------------------------

    @property
    def _set_meta(self) -> str:
        return (
            f"INSERT INTO {self.dialect.meta_table} (key, value) VALUES ({self.mark}, {self.mark}) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        )

    def set_meta(self, key: str, value: str) -> None:
        self.change(None, lambda cur: cur.execute(self._set_meta, (key, value)))

    def meta(self, key: str) -> str | None:
        rows = self.select(
            f"SELECT value FROM {self.dialect.meta_table} WHERE key = {self.mark}", (key,)
        )
        return str(rows[0][0]) if rows else None

    # -- memories -------------------------------------------------------------------------

    def existing(self, profile: str, hashes: Sequence[str]) -> dict[str, str]:
        head = f"SELECT content_hash, id FROM memories WHERE profile = {self.mark} AND content_hash"
        return {str(h): str(i) for h, i in self.select_in(head, profile, hashes)}

    def other_scopes(self, profile: str, scope: str) -> bool:
        # The least and greatest scope, a seek each on (profile, scope, key) whatever plan
        # a server keeps (a range test's generic plan scanned all of a one-scope profile).
        ends = [
            f"(SELECT {f}(scope) FROM memories WHERE profile = {self.mark})" for f in ("min", "max")
        ]
        ((least, greatest),) = self.select(f"SELECT {', '.join(ends)}", (profile, profile))
        return least is not None and (least, greatest) != (scope, scope)

    def scope_members(self, profile: str, scope: str) -> set[int]:
        head = f"SELECT key FROM memories WHERE profile = {self.mark} AND scope"
        return {int(key) for (key,) in self.select_in(head, profile, [scope])}

    def rescope(self, keys: Sequence[str]) -> int:
        m = self.mark

        def work(cur: Cursor) -> int:
            rows = cur.execute(
                "SELECT key, id, profile, content, content_hash, metadata, scope FROM memories"
            ).fetchall()
            changed: list[tuple[str, str, int]] = []
            held: dict[tuple[str, str], str] = {}
            for key, id_, profile, content, old_hash, metadata, old_scope in rows:
                scope = scope_of(json.loads(metadata), keys)
                digest = content_hash(content, scope) if scope != old_scope else old_hash
                other = held.setdefault((profile, digest), id_)
                if other != id_:
                    raise ConfigError(
                        f"with scope keys {list(keys)}, memories {other} and {id_} of "
                        f"profile {profile!r} would be one memory (the same text in the same "
                        "scope): open the store with the scope keys it was written with, or "
                        "forget one of them first"
                    )
                if scope != old_scope:
                    changed.append((scope, digest, key))
            # through a placeholder hash first: a memory may take the hash another gives up
            cur.executemany(
                f"UPDATE memories SET content_hash = {m} WHERE key = {m}",
                [(f"rescope {key}", key) for _, _, key in changed],
            )
            cur.executemany(
                f"UPDATE memories SET scope = {m}, content_hash = {m} WHERE key = {m}", changed
            )
            if changed:  # what linked memories now of different scopes goes
                for table, a, b in (("edges", "src", "dst"), ("fact_updates", "older", "newer")):
                    cur.execute(
                        f"DELETE FROM {table} WHERE EXISTS (SELECT 1 FROM memories x, memories y "
                        f"WHERE x.key = {table}.{a} AND y.key = {table}.{b} "
                        "AND x.scope <> y.scope)"
                    )
                # edges went between memories that no key list of the feed names: every
                # profile's indexes read what they hold again (the edge arrays whole)
                for profile in sorted({p for _, _, p, _, _, _, _ in rows}):
                    feed.append(cur, m, profile, feed.Pending(rederived=True))
            cur.execute(self._set_meta, (SCOPE_KEYS_META, json.dumps(list(keys))))
            return len(changed)

        moved = self.change(None, work)
        if moved:  # this process's own commit: what it keeps is read again
            self.cache.clear()
            self._commits += 1
        return moved

    def health(self) -> dict[str, Any]:
        """Where the store is and whether it answers, with what its database reports
        (:meth:`_health`); a store that does not answer says why."""
        where = {"kind": self.kind, "location": self.location}
        try:
            details = self._health()
        except StoreError as exc:
            return {**where, "healthy": False, "reason": str(exc)}
        return {**where, "healthy": True, **details, "reason": None}

    def profiles(self) -> list[str]:
        return [r[0] for r in self.select("SELECT DISTINCT profile FROM memories ORDER BY 1")]

    def profile_summaries(self) -> list[tuple[str, int, int]]:
        return [(str(r[0]), int(r[1]), int(r[2])) for r in self.select(sql.PROFILE_SUMMARIES)]

    def get(self, profile: str, ids: Sequence[str]) -> list[MemoryRecord]:
        by_id = {r.id: r for r in self._memories(profile, "id", ids)}
        return [by_id[i] for i in ids if i in by_id]

    def get_by_keys(self, profile: str, keys: Iterable[int]) -> dict[int, MemoryRecord]:
        def fetch(missing: list[int]) -> dict[int, MemoryRecord]:
            # kept records are shared by recalls: their metadata cannot be changed in place
            return {
                r.key: replace(r, metadata=MappingProxyType(dict(r.metadata)))
                for r in self._memories(profile, "key", missing)
            }

        return self.cache.keyed("records", profile, keys, fetch)

    def page(self, profile: str, limit: int, offset: int, filters: Filters) -> list[MemoryRecord]:
        where, params = self.dialect.where(profile, filters)
        rows = self.select(sql.page_sql(where, self.mark), [*params, limit, offset])
        return [self._record(r) for r in rows]

    def scan(self, profile: str, after_key: int, limit: int) -> list[MemoryRecord]:
        rows = self.select(sql.scan_sql(self.mark), (profile, after_key, limit))
        return [self._record(r) for r in rows]

    def count(self, profile: str, filters: Filters | None = None) -> int:
        where, params = self.dialect.where(profile, filters or Filters())
        return int(self.select(sql.count_sql(where), params)[0][0])

    def index_counts(self, profile: str) -> dict[str, int]:
        tables = {"memories": "memories", "embeddings": "embeddings", "lexical": "lex_docs"}
        count = f"SELECT count(*) FROM {{}} WHERE profile = {self.mark}"
        return {
            name: int(self.select(count.format(table), (profile,))[0][0])
            for name, table in tables.items()
        }

    def allowed_keys(self, profile: str, filters: Filters) -> set[int]:
        where = self.dialect.where(profile, filters)
        return sql.allowed_keys(self.select, self._allowed, profile, filters, self.mark, *where)

    # -- writes ---------------------------------------------------------------------------

    def insert(
        self, profile: str, items: Sequence[NewMemory], *, supersede_updates: bool = False
    ) -> list[Stored]:
        # What stays valid in the read cache: all but the rows new memories change in the
        # memories already stored (readcache.py).
        superseding = supersede_updates or any(item.supersedes for item in items)
        changed: set[int] = set()  # the new keys
        kept = Kept(
            profile,
            STORED_KEEPS - {"records"} if superseding else STORED_KEEPS,
            dict.fromkeys(STORED_KEEPS, changed),
        )

        def work(cur: Cursor) -> list[Stored]:
            head = f"SELECT content_hash, id, key FROM memories WHERE profile = {self.mark} "
            hashes = [item.content_hash for item in items]
            known: dict[str, tuple[str, int]] = {
                h: (i, k)
                for h, i, k in self.dialect.rows_in(
                    cur, head + "AND content_hash", [profile], hashes
                )
            }
            new = list({i.content_hash: i for i in items if i.content_hash not in known}.values())
            stored = self._insert_memories(cur, profile, new)
            fresh = [(key, item) for (_, key), item in zip(stored, new, strict=True)]
            for (id_, _), item in zip(stored, new, strict=True):
                at = lifecycle.start(item)
                lifecycle.supersede(cur, self.mark, profile, id_, item.supersedes, at)
            created = {item.content_hash: pair for pair, item in zip(stored, new, strict=True)}
            results = []
            for item in items:
                pair = created.pop(item.content_hash, None)
                if pair is not None:
                    known[item.content_hash] = pair
                results.append(Stored(*known[item.content_hash], created=pair is not None))
            unfinished.mark(cur, self.dialect, profile, [id_ for id_, _ in stored])
            self._insert_vectors(cur, profile, fresh)
            self.recorder.written(key for key, _ in fresh)
            changed.update(key for key, _ in fresh)
            derived.insert(cur, self.dialect, profile, fresh)
            fields.insert(cur, self.mark, profile, fresh)
            lifecycle.insert_facts(cur, self.mark, profile, fresh, supersede_updates)
            return results

        return self.change(profile, work, kept=kept)

    def delete(self, profile: str, ids: Sequence[str]) -> list[str]:
        def work(cur: Cursor) -> list[str]:
            rows = forgetting.by_ids(cur, self.dialect, profile, ids)
            removed = set(self._remove(cur, profile, rows))
            return [i for i in dict.fromkeys(ids) if i in removed]

        return self.change(profile, work)

    def delete_matching(self, profile: str, filters: Filters, dry_run: bool = False) -> list[str]:
        chosen, params = forgetting.matching(self.dialect, profile, filters)
        if dry_run:
            return [id_ for _, id_, _ in sorted(self.select(chosen, params))]
        # chosen inside the transaction that removes them: all or nothing
        return self.change(
            profile, lambda cur: self._remove(cur, profile, cur.execute(chosen, params).fetchall())
        )

    def _remove(self, cur: Cursor, profile: str, rows: Iterable[Sequence[Any]]) -> list[str]:
        return forgetting.remove(
            cur, self.dialect, profile, rows, self._delete_vectors, self.recorder
        )

    def rederive(self, profile: str, items: Sequence[tuple[int, NewMemory]]) -> None:
        """Replace the lexical, graph and passage rows of stored memories (``slm reindex``)
        in one transaction. Vectors and tags are kept: they never need recomputing."""
        m = self.mark

        def work(cur: Cursor) -> None:
            keys = [key for key, _ in items]
            head = (
                f"SELECT key, terms FROM lex_docs WHERE {self.dialect.by_key}profile = {m} AND key"
            )
            terms: dict[int, str] = dict(self.dialect.rows_in(cur, head, [profile], keys))
            for key in keys:
                words = terms[key].split() if key in terms else None
                derived.delete(cur, self.dialect, profile, key, words, relink=False)
                lifecycle.delete_facts(cur, m, profile, key, relinked=False)
            derived.delete_passages(cur, self.dialect, keys)
            derived.insert(cur, self.dialect, profile, items, rederive=True)
            lifecycle.insert_facts(cur, m, profile, list(items))
            self.recorder.rederived()

        self.change(profile, work)

    # -- the lexical index ----------------------------------------------------------------

    def postings(self, profile: str, terms: Sequence[str], limit: int) -> dict[str, Postings]:
        """In the order of ``terms`` (a recall's BM25 sums are added up in it)."""
        found = self.cache.keyed(
            f"postings/{limit}",
            profile,
            terms,
            lambda missing: self._read_postings(profile, missing, limit),
            POSTINGS_LIMIT,
        )
        return {term: found[term] for term in dict.fromkeys(terms) if term in found}

    def _read_postings(self, profile: str, terms: Sequence[str], limit: int) -> dict[str, Postings]:
        """The postings of ``terms`` as the database holds them now."""
        return self._read(lambda cur: self.dialect.postings(cur, profile, terms, limit))

    def doc_terms(self, profile: str, keys: Sequence[int]) -> dict[int, tuple[str, ...]]:
        head = (
            f"SELECT key, terms FROM lex_docs WHERE {self.dialect.by_key}profile = {self.mark} "
            "AND key"
        )
        return self.cache.keyed(
            "terms",
            profile,
            keys,
            lambda missing: {
                k: tuple(t.split()) for k, t in self.select_in(head, profile, missing)
            },
        )

    def lexical_stats(self, profile: str, terms: Sequence[str]) -> LexicalStats:
        m = self.mark
        statement = f"SELECT n_docs, total_len FROM lex_stats WHERE profile = {m}"
        rows = self.cache.value("lex_stats", profile, lambda: self.select(statement, (profile,)))
        n_docs, total = rows[0] if rows else (0, 0)
        head = f"SELECT term, df FROM lex_terms WHERE profile = {m} AND term"
        df = self._pairs("df", head, profile, terms)
        return LexicalStats(n_docs, total / n_docs if n_docs else 0.0, df)

    # -- the graph and time ---------------------------------------------------------------

    def find_entities(
        self, profile: str, names: Sequence[str]
    ) -> dict[str, list[tuple[int, str, int]]]:
        def fetch(missing: list[str]) -> dict[str, tuple[tuple[int, str, int], ...]]:
            found = self._read(lambda cur: self.dialect.find_entities(cur, profile, missing))
            return {name: tuple(matches) for name, matches in found.items()}

        kept = self.cache.keyed("entities by name", profile, names, fetch)
        return {name: list(kept[name]) for name in names if name in kept}

    def speakers(self, profile: str, entities: Sequence[int]) -> set[int]:
        def fetch(missing: list[int]) -> dict[int, bool]:
            found = self._read(lambda cur: self.dialect.speakers(cur, profile, missing))
            return {entity: entity in found for entity in missing}

        kept = self.cache.keyed("speakers", profile, entities, fetch)
        return {entity for entity, speaks in kept.items() if speaks}

    def entity_members(
        self, profile: str, entities: Sequence[int], limit: int
    ) -> dict[int, tuple[int, ...]]:
        def fetch(missing: list[int]) -> dict[int, tuple[int, ...]]:
            found = self._read(
                lambda cur: self.dialect.entity_members(cur, profile, missing, limit)
            )
            return {entity: tuple(keys) for entity, keys in found.items()}

        return self.cache.keyed(f"members {limit}", profile, entities, fetch)

    def time_overlaps(
        self, profile: str, start: int, end: int, limit: int
    ) -> dict[int, tuple[int, int]] | None:
        return self._read(lambda cur: self.dialect.time_overlaps(cur, profile, start, end, limit))

    def memory_entities(
        self, profile: str, keys: Sequence[int]
    ) -> dict[int, list[tuple[int, str, int, int]]]:
        # Kept in two parts: what a memory mentions never changes once it is stored, while
        # an entity's count changes with every new memory that mentions it (readcache.py).
        head = (
            "SELECT m.key, e.id, e.name, e.mentions, m.speaker FROM mentions m JOIN entities e "
            f"ON e.id = m.entity WHERE {self.dialect.by_key}e.profile = {self.mark} AND m.key"
        )
        counted: dict[int, int] = {}

        def fetch(missing: list[int]) -> dict[int, tuple[tuple[int, str, int], ...]]:
            found = self._grouped(head, profile, missing)
            for rows in found.values():
                counted.update((entity, count) for entity, _, count, _ in rows)
            return {
                key: tuple(sorted((entity, name, speaker) for entity, name, _, speaker in rows))
                for key, rows in found.items()
            }

        mentioned = self.cache.keyed("mentions", profile, keys, fetch)
        wanted = {entity for rows in mentioned.values() for entity, _, _ in rows}
        # the counts read with the mentions are as current as they are
        counts = {**self._entity_counts(profile, wanted - counted.keys()), **counted}
        return {
            key: [(entity, name, counts.get(entity, 0), speaker) for entity, name, speaker in rows]
            for key, rows in mentioned.items()
        }

    def _entity_counts(self, profile: str, entities: Iterable[int]) -> dict[int, int]:
        """How many memories mention each of ``entities``."""
        head = f"SELECT id, mentions FROM entities WHERE {self.dialect.by_key}profile = {self.mark}"
        return self._pairs("entity counts", f"{head} AND id", profile, entities)

    def event_times(self, profile: str, keys: Sequence[int]) -> dict[int, int]:
        head = (
            f"SELECT key, event_time FROM memories WHERE {self.dialect.by_key}profile = {self.mark}"
        )
        return self._pairs("event_times", f"{head} AND key", profile, keys)

    def referenced_times(
        self, profile: str, keys: Sequence[int]
    ) -> dict[int, tuple[tuple[int, int], ...]]:
        head = (
            "SELECT key, start_us, end_us FROM memory_times "
            f"WHERE {self.dialect.by_key}profile = {self.mark} AND key"
        )
        return self._sorted_groups("times", head, profile, keys)
