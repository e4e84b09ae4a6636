"""The ``Store`` protocol: everything the engine needs from persistence, and nothing else.

A store is the only code that speaks SQL. It keeps the rows of record, memories and the
rows derived from them (vectors, lexical postings, entities, edges), consistent in one
transaction per write, and isolates profiles: every method takes the profile and never
returns another profile's rows. What recall reads in process, built from those rows (the
vector indexes, the edge arrays), is not the store's: :mod:`slm.index`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from slm.models import MemoryRecord, NewMemory, from_micros
from slm.store.readcache import ReadCache

Vector = npt.NDArray[np.float32]

#: Index keys one memory owns in the ``passages`` table: its key times this, plus an
#: ordinal. Ordinal 0 is the memory's own vector (in ``embeddings``), 1 to
#: ``MAX_PASSAGES - 1`` its further passages, ``MAX_PASSAGES`` onwards its standing
#: statements (see :mod:`slm.ingest.standing`).
PASSAGE_SPAN = 512
MAX_PASSAGES = 256
STANDING_BASE = MAX_PASSAGES


@dataclass(frozen=True, slots=True)
class Filters:
    """Restrictions a recall or list applies before ranking. Empty means everything."""

    source: str | None = None
    tags: tuple[str, ...] = ()
    after: datetime | None = None
    before: datetime | None = None
    #: only memories that held at this moment
    as_of: datetime | None = None
    #: only memories whose content contains this text (case-insensitive for ASCII letters)
    text: str | None = None
    #: only memories whose metadata holds, for each key, one of its values
    metadata: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def is_empty(self) -> bool:
        return (
            self.text is None
            and not self.metadata
            and self.source is None
            and not self.tags
            and self.after is None
            and self.before is None
            and self.as_of is None
        )


@dataclass(frozen=True, slots=True)
class Postings:
    """The postings of one term in one profile: parallel arrays of keys, term frequencies
    and document lengths."""

    keys: npt.NDArray[np.int64]
    tf: npt.NDArray[np.float32]
    dl: npt.NDArray[np.float32]

    @classmethod
    def of(cls, rows: Sequence[tuple[int, int, int]]) -> Postings:
        """From (key, tf, dl) rows."""
        arr = np.array(rows, dtype=np.int64).reshape(-1, 3)
        return cls(arr[:, 0], arr[:, 1].astype(np.float32), arr[:, 2].astype(np.float32))


@dataclass(frozen=True, slots=True)
class LexicalStats:
    n_docs: int
    avg_len: float
    df: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class LoggedRecall:
    """One logged recall: its ``query_id``, when (microseconds), the request as JSON, the
    ids it showed as JSON, and once feedback named it, its window's features
    (``slm.learn.adapt``)."""

    query_id: str
    created_at: int
    request: str
    shown: str
    example: bytes | None = None


@dataclass(frozen=True, slots=True)
class FeedbackEvent:
    """One feedback event: a memory was (not) useful, for a logged recall or in general."""

    memory_id: str
    useful: bool
    query_id: str | None
    created_at: int
    #: order of arrival in the store (0 until stored)
    seq: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "useful": self.useful,
            "query_id": self.query_id,
            "at": from_micros(self.created_at).isoformat(),
        }


#: How the slot of a change found by meaning starts; the rest is its evidence.
MEANING = "meaning: "


@dataclass(frozen=True, slots=True)
class Update:
    """Memory ``newer`` replaces memory ``older``: explicitly (it superseded it), or
    probably: it gives another value for a fact ``older`` states (``slot`` =
    ``subject|attribute``, ``slm.ingest.facts``), or says something else about what
    ``older`` said (``slot`` = :data:`MEANING` and the evidence, ``slm.ingest.changes``)."""

    older: int
    newer: int
    older_id: str
    newer_id: str
    #: ``""`` for an explicit supersession (``superseded_by``)
    slot: str
    #: when ``newer`` starts to hold
    newer_from: datetime

    @property
    def explicit(self) -> bool:
        return not self.slot

    @property
    def by_meaning(self) -> bool:
        return self.slot.startswith(MEANING)


class Cursor(Protocol):
    """An open cursor of a store's transaction: an ``sqlite3`` connection or a psycopg
    cursor (``execute`` returns something to ``fetchall`` from)."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: str, params: Sequence[Sequence[Any]], /) -> Any: ...


#: The store-wide setting naming the scope keys its memories' scopes were read with.
SCOPE_KEYS_META = "scope keys"


@dataclass(frozen=True, slots=True)
class Stored:
    """Outcome of inserting one item: its id and whether it was new."""

    id: str
    key: int
    created: bool


class Rows(Protocol):
    """The memories themselves: the source of truth, written in one transaction per call."""

    def existing(self, profile: str, hashes: Sequence[str]) -> dict[str, str]:
        """Map each content hash already stored in the profile to its memory id."""

    def insert(
        self, profile: str, items: Sequence[NewMemory], *, supersede_updates: bool = False
    ) -> list[Stored]:
        """Store items in one transaction; an item whose hash exists returns the existing id.

        Each new item supersedes the memories its ``supersedes`` names; with
        ``supersede_updates`` it also supersedes (or is superseded by) the memories it is a
        probable update of (or that are probable updates of it). Inside a write of several
        parts (:func:`slm.store.unfinished.writing_in_parts`) the new memories are marked as
        ones it may still take away."""

    def told(self, profile: str, ids: Sequence[str]) -> dict[str, bool]:
        """Those of ``ids`` stored now, read from the rows themselves (no cache), each with
        whether an unfinished write may still take it away (:mod:`slm.store.unfinished`)."""

    def claim(self, profile: str, ids: Sequence[str]) -> set[str]:
        """Keep ``ids`` from being taken away by the unfinished write that created them;
        those still stored (one transaction under the profile's write lock)."""

    def finish(self, profile: str, ids: Sequence[str]) -> None:
        """The write of several parts that created ``ids`` succeeded: they are no longer
        its to take away."""

    def take_back(self, profile: str, ids: Sequence[str]) -> list[str]:
        """Remove those of ``ids`` (created by a write of several parts that failed) that no
        other write has claimed, as :meth:`delete` does, in one transaction; the ids
        removed."""

    def get(self, profile: str, ids: Sequence[str]) -> list[MemoryRecord]:
        """The memories with these ids, in the order given, skipping unknown ids."""

    def get_by_keys(self, profile: str, keys: Iterable[int]) -> dict[int, MemoryRecord]: ...

    def page(self, profile: str, limit: int, offset: int, filters: Filters) -> list[MemoryRecord]:
        """Most recently recorded first."""

    def count(self, profile: str, filters: Filters | None = None) -> int: ...

    def scan(self, profile: str, after_key: int, limit: int) -> list[MemoryRecord]:
        """Up to ``limit`` memories with key above ``after_key``, in key order (for export)."""

    def delete(self, profile: str, ids: Sequence[str]) -> list[str]:
        """Remove memories and every derived row in one transaction; return the ids removed."""

    def delete_matching(self, profile: str, filters: Filters, dry_run: bool = False) -> list[str]:
        """Remove the memories passing ``filters`` (not empty) as :meth:`delete` does, chosen
        and removed in one transaction; return their ids in key order. With ``dry_run``,
        only the ids that would be removed now."""

    def allowed_keys(self, profile: str, filters: Filters) -> set[int]: ...

    def other_scopes(self, profile: str, scope: str) -> bool:
        """Whether the profile holds a memory of another scope than ``scope``
        (``slm.models.scope_of``): when it does not, there is nothing to keep apart."""

    def scope_members(self, profile: str, scope: str) -> set[int]:
        """Keys of the profile's memories in ``scope``."""

    def rescope(self, keys: Sequence[str]) -> int:
        """Read every memory's scope (and with it its content hash) again from its metadata
        under the scope ``keys``, in one transaction, and remove the links (graph edges,
        probable updates) between memories that are then of different scopes; the keys are
        recorded in the store's settings. :class:`ConfigError`, and nothing changed, when
        two memories of a profile would become one. Returns how many changed scope."""

    def rederive(self, profile: str, items: Sequence[tuple[int, NewMemory]]) -> None:
        """Replace the lexical and graph rows of stored memories in one transaction."""


class Versions(Protocol):
    """Which memories stopped holding and what replaced them: explicit supersessions and
    the probable updates read from the facts memories state."""

    def superseded(self, profile: str, moment: datetime) -> set[int]:
        """Keys of the memories that stopped holding at or before ``moment``."""

    def replaced(self, profile: str, newer_id: str) -> list[int]:
        """Keys of the memories that memory ``newer_id`` superseded explicitly."""

    def supersede(
        self, profile: str, newer_id: str, older_ids: Sequence[str], moment: datetime
    ) -> None:
        """End the validity of stored memories at ``moment``, naming the stored memory that
        replaces them, in one transaction."""

    def dismiss(self, profile: str, older_id: str, newer_id: str) -> bool:
        """Undo the link between two memories of the profile (both exist): the probable
        update is removed for good and a supersession ended; False if none linked them."""

    def updates(self, profile: str, keys: Sequence[int]) -> list[Update]:
        """The probable updates in which any of ``keys`` is the older or the newer memory,
        and the explicit supersessions of any of ``keys``."""

    def stating(self, profile: str, slots: Sequence[str]) -> set[int]:
        """Keys of the memories that state a value for any of ``slots``
        (``subject|attribute``, :mod:`slm.ingest.facts`)."""

    def update_count(self, profile: str) -> int:
        """How many probable updates the profile holds."""

    def exist(self, profile: str) -> bool:
        """Whether the profile holds any probable update or any memory whose validity
        ended: when it holds none, a recall skips the version steps."""


class Lexical(Protocol):
    """The BM25 inverted index and its per-profile statistics."""

    def postings(self, profile: str, terms: Sequence[str], limit: int) -> dict[str, Postings]:
        """Each term's postings with the highest impact (term frequency descending, then
        document length ascending, then key), at most ``limit`` per term."""

    def doc_terms(self, profile: str, keys: Sequence[int]) -> dict[int, tuple[str, ...]]:
        """The indexed terms of each memory (in text order, repeated as they occur)."""

    def lexical_stats(self, profile: str, terms: Sequence[str]) -> LexicalStats: ...


class Graph(Protocol):
    """Entities, mentions and the times memories refer to (memory-memory edges are read
    from their arrays, :mod:`slm.index.edges`)."""

    def find_entities(
        self, profile: str, names: Sequence[str]
    ) -> dict[str, list[tuple[int, str, int]]]:
        """Entities matching each name (itself, or the one full name a first name starts),
        as (entity id, name, number of memories mentioning it)."""

    def speakers(self, profile: str, entities: Sequence[int]) -> set[int]:
        """Those of ``entities`` that speak in at least one memory (``"Name: ..."``)."""

    def entity_members(
        self, profile: str, entities: Sequence[int], limit: int
    ) -> dict[int, tuple[int, ...]]:
        """Keys of memories mentioning each entity, newest first, at most ``limit`` each."""

    def memory_entities(
        self, profile: str, keys: Sequence[int]
    ) -> dict[int, list[tuple[int, str, int, int]]]:
        """Entities mentioned by each memory, as (entity id, name, mention count, speaker
        flag: 1 when the entity is the memory's speaker, 0 otherwise)."""

    def time_overlaps(
        self, profile: str, start: int, end: int, limit: int
    ) -> dict[int, tuple[int, int]] | None:
        """Memories whose event time or a referenced date falls in [start, end) (microseconds),
        with the matching (start, end); ``None`` when more than ``limit`` match (found out
        by counting, without reading them)."""

    def event_times(self, profile: str, keys: Sequence[int]) -> dict[int, int]:
        """Event time of each memory, in microseconds since the epoch."""

    def referenced_times(
        self, profile: str, keys: Sequence[int]
    ) -> dict[int, tuple[tuple[int, int], ...]]:
        """Dates each memory's text refers to, as (start, end) microseconds."""


class FeedbackLog(Protocol):
    """What use teaches, kept per profile: the recall log, feedback events and each
    source's trust counts."""

    def trust(self, profile: str, sources: Iterable[str]) -> dict[str, tuple[int, int]]:
        """(useful, not useful) feedback counts per source."""

    def add(
        self, profile: str, source: str, useful: bool, event: FeedbackEvent | None = None
    ) -> None:
        """Count feedback on a source and, with ``event``, record the event (one
        transaction)."""

    def events(
        self, profile: str, limit: int, offset: int = 0, *, labelled_only: bool = False
    ) -> list[FeedbackEvent]:
        """Feedback events, newest first (``labelled_only``: those naming a recall)."""

    def marks(
        self, profile: str, memory_ids: Sequence[str], before: int | None = None
    ) -> dict[str, tuple[int, int]]:
        """(useful, not useful) counts of the feedback naming a recall, per memory id;
        with ``before`` (microseconds), only feedback given earlier."""

    def asked(self, profile: str, memory_ids: Sequence[str]) -> dict[str, list[tuple[bool, str]]]:
        """The labels given to each memory for a logged recall, newest first, each as
        (useful, the question that recall asked)."""

    def reset(self, profile: str) -> int:
        """Erase the profile's feedback events, recall log and source trust counts; the
        number of events erased."""

    def log(self, profile: str, entries: Sequence[LoggedRecall]) -> None:
        """Keep each recall's request and results under its ``query_id``, in one
        transaction (committed without waiting for the disk: a power cut may lose the last
        few)."""

    def logged(self, profile: str, query_ids: Sequence[str]) -> dict[str, LoggedRecall]:
        """The logged recalls among ``query_ids``."""

    def keep_example(self, profile: str, query_id: str, example: bytes) -> None:
        """Store the features of a logged recall's window."""


class Admin(Protocol):
    """Metadata, health and the lifecycle of the store."""

    def index_counts(self, profile: str) -> dict[str, int]:
        """Rows per index for the profile: ``memories``, ``embeddings``, ``lexical``."""

    def profiles(self) -> list[str]:
        """Every profile that holds at least one memory, sorted (for copying a whole store)."""

    def profile_summaries(self) -> list[tuple[str, int, int]]:
        """Every profile that holds at least one memory, sorted: its name, how many memories,
        and the ``recorded_at`` (microseconds) of its newest."""

    def meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def health(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class Store(Rows, Lexical, Graph, Admin, Protocol):
    """Persistence for memories and the rows derived from them. Implementations: sqlite,
    postgres.

    The parts are separate protocols so that a component can ask for only what it reads
    (the lexicon view needs :class:`Lexical`, the graph view :class:`Graph`). Two parts
    are objects of their own: what use teaches (:attr:`feedback`) and which memories
    replaced which (:attr:`versions`)."""

    kind: str
    location: str
    #: where what is derived from the store may be saved beside it (None: nowhere)
    folder: Path | None
    #: what the store keeps of its rows between reads
    cache: ReadCache

    def reading(self, profile: str) -> AbstractContextManager[None]:
        """One recall's reads of ``profile``: other processes' commits checked once for all
        of them (and, on a server, one connection held for them)."""

    def writing(self, profile: str) -> AbstractContextManager[None]:
        """One write call's statements to ``profile``, its reads and its transaction (on a
        server, one connection held for them, other servers' commits checked once)."""

    @property
    def feedback(self) -> FeedbackLog: ...

    @property
    def versions(self) -> Versions: ...


def times_in(
    store: Store, profile: str, keys: Sequence[int], start: int, end: int
) -> dict[int, tuple[int, int]]:
    """Those of ``keys`` whose event time falls in [start, end), or a date their text refers
    to overlaps it: key -> the matching time as (start, end) (event time as a zero-length
    span, preferred over a referenced date)."""
    found: dict[int, tuple[int, int]] = {}
    for key, moment in store.event_times(profile, keys).items():
        if start <= moment < end:
            found[key] = (moment, moment)
    for key, spans in store.referenced_times(profile, keys).items():
        for span_start, span_end in spans:
            if span_start < end and span_end > start:
                found.setdefault(key, (span_start, span_end))
    return found
