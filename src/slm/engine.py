"""``Memory``: the library API. Validates at the boundary, then delegates.

Writing: validate -> hash (idempotent per profile) -> derive (terms, embedding) -> one
store transaction. Reading: validate -> :func:`slm.recall.recall` (the read path).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from slm import validate
from slm.channels import Channel, build_channels, enabled, registered
from slm.contract import RecallResponse
from slm.embed import Embedder, Matrix, embed_passages, make_embedder, reads_passages
from slm.errors import ChannelUnavailable, ConfigError, InvalidInput, NotFound
from slm.ingest import SEMANTIC_LINK_FLOOR, SEMANTIC_LINKS, derive, semantic_links
from slm.ingest.standing import standing_statements
from slm.models import MemoryRecord, NewMemory
from slm.recall import recall as read
from slm.recall.fusion import source_trust
from slm.settings import Settings, default_db_path
from slm.store import Filters, Location, Store, open_store
from slm.store.base import MAX_PASSAGES
from slm.text import terms

log = logging.getLogger("slm")
log.addHandler(logging.NullHandler())

_EMBEDDER_META = "embedder"
#: Threads that embed questions while their recalls read the lexical index.
QUERY_THREADS = 4


@dataclass(frozen=True, slots=True)
class Remembered:
    """What :meth:`Memory.store_many` did with one item: the stored memory, and whether it
    was stored by this call (False: identical content was already there)."""

    memory: MemoryRecord
    created: bool


@dataclass(frozen=True, slots=True)
class MemoryInput:
    """One item for :meth:`Memory.remember_many` (a plain dict with these keys works too)."""

    content: str
    event_time: datetime | str | None = None
    source: str | None = None
    confidence: float = 1.0
    metadata: Mapping[str, Any] | str | None = None
    tags: Sequence[str] = field(default_factory=tuple)
    id: str | None = None
    recorded_at: datetime | str | None = None


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Memory:
    """A memory store for one profile.

    Args:
        path: SQLite file (default: ``SLM_DB``, else ``memory.db`` in ``SLM_HOME`` or the
            platform's user data directory), or a :class:`slm.store.Location`.
        dsn: a PostgreSQL DSN instead of a file.
        profile: the tenant; memories of other profiles are never seen.
        settings: tunables; default :meth:`Settings.from_env`.
        embedder: an embedder object, overriding ``settings.embedder``.
    """

    def __init__(
        self,
        path: str | Path | Location | None = None,
        *,
        dsn: str | None = None,
        profile: str = "default",
        settings: Settings | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings if settings is not None else Settings.from_env()
        self.profile = validate.profile(profile)
        self.embedder = embedder if embedder is not None else make_embedder(self.settings.embedder)
        if isinstance(path, Location):
            location = path
        elif dsn is not None:
            location = Location(dsn=dsn)
        else:
            location = Location(path=Path(path) if path is not None else default_db_path())
        # Threads start on first use, so an instance that fails to open leaves none behind.
        self._queries = ThreadPoolExecutor(QUERY_THREADS, thread_name_prefix="slm-query")
        self.store: Store = open_store(location, self.embedder.dim)
        try:
            self._check_embedder()
            self.channels: dict[str, Channel] = build_channels(self.settings)
            self._channel_errors: dict[str, str] = {}
            self._check_required_channels()
        except BaseException:
            self.store.close()
            raise

    def _check_embedder(self) -> None:
        stored = self.store.meta(_EMBEDDER_META)
        if stored is None:
            self.store.set_meta(_EMBEDDER_META, self.embedder.name)
        elif stored != self.embedder.name:
            raise ConfigError(
                f"this store holds vectors of embedder {stored!r}, not {self.embedder.name!r}; "
                "open it with the same embedder"
            )

    def _check_required_channels(self) -> None:
        for name in self.settings.required_channels:
            if name not in enabled(self.settings):
                raise ChannelUnavailable(f"required channel {name!r} is disabled by settings")
            state = self.channel_health(name)
            if not state["healthy"]:
                raise ChannelUnavailable(
                    f"required channel {name!r} is unhealthy: {state['reason']}"
                )

    def channel_health(self, name: str, counts: Mapping[str, int] | None = None) -> dict[str, Any]:
        """Health of one channel: its own check, its index's completeness, its last error."""
        channel = self.channels.get(name)
        if channel is None:
            return {"healthy": False, "reason": "not available in this version", "enabled": False}
        health = channel.health()
        reason = health.reason
        if health.healthy:
            reason = self._channel_errors.get(name)
            if reason is not None:
                reason = f"failed in the last recall: {reason}"
        if reason is None and channel.index is not None:
            counts = counts if counts is not None else self.store.index_counts(self.profile)
            missing = counts["memories"] - counts[channel.index]
            if missing:
                reason = f"{missing} memories are missing from its index; run 'slm reindex'"
        return {
            "healthy": reason is None,
            "reason": reason,
            "enabled": name in enabled(self.settings),
        }

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._queries.shutdown(wait=True)
        self.store.close()

    # -- writing ------------------------------------------------------------------------

    def remember(
        self,
        content: str,
        *,
        event_time: datetime | str | None = None,
        source: str | None = None,
        confidence: float = 1.0,
        metadata: Mapping[str, Any] | str | None = None,
        tags: Sequence[str] = (),
    ) -> MemoryRecord:
        """Store one memory and return it; identical content returns the stored one."""
        item = MemoryInput(content, event_time, source, confidence, metadata, tags)
        return self.remember_many([item])[0]

    def remember_many(self, items: Iterable[MemoryInput | Mapping[str, Any]]) -> list[MemoryRecord]:
        """Store a batch in one transaction with batched embedding; one record per item.

        The whole batch is validated first: one bad item rejects the batch and stores nothing.
        """
        return [r.memory for r in self.store_many(items)]

    def store_many(self, items: Iterable[MemoryInput | Mapping[str, Any]]) -> list[Remembered]:
        """:meth:`remember_many`, saying for each item whether it was stored now
        (``created``) or its content was already stored (the first of several identical
        items in one batch is the one created)."""
        if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
            raise InvalidInput("items must be a list of memories", field="items")
        batch = list(islice(items, validate.MAX_BATCH + 1))
        if len(batch) > validate.MAX_BATCH:
            raise InvalidInput(
                f"more than {validate.MAX_BATCH} items in one batch; "
                f"the limit is {validate.MAX_BATCH}",
                field="items",
            )
        now = datetime.now(UTC)
        numbered = len(batch) > 1
        checked = [self._check_item(i, item, now, numbered) for i, item in enumerate(batch)]
        known = self.store.existing(self.profile, [c.content_hash for c in checked])
        pending: dict[str, NewMemory] = {}
        for c in checked:
            if c.content_hash not in known:
                pending.setdefault(c.content_hash, c)
        fresh = list(pending.values())
        passages = embed_passages(self.embedder, [c.content for c in fresh], MAX_PASSAGES)
        embedded = _firsts(passages, self.embedder.dim)
        standing = self._standing([c.content for c in fresh], [c.source for c in fresh])
        links = semantic_links(self.store, self.profile, embedded)
        new_items = [
            _with_derived(c, p, stored, batch, statements)
            for c, p, (stored, batch), statements in zip(
                fresh, passages, links, standing, strict=True
            )
        ]
        ids = dict(known)
        if new_items:
            stored = self.store.insert(self.profile, new_items)
            ids.update((n.content_hash, s.id) for n, s in zip(new_items, stored, strict=True))
        records = {r.id: r for r in self.store.get(self.profile, list(set(ids.values())))}
        out = []
        for c in checked:
            created = c.content_hash not in known
            known.setdefault(c.content_hash, ids[c.content_hash])
            out.append(Remembered(records[ids[c.content_hash]], created))
        return out

    def _standing(
        self, contents: Sequence[str], sources: Sequence[str | None]
    ) -> list[tuple[tuple[str, str, bytes], ...]]:
        """(kind, statement, vector of its scope) of each text's standing statements,
        the scopes embedded in one batch."""
        found = [standing_statements(c, s) for c, s in zip(contents, sources, strict=True)]
        scopes = [statement.scope for statements in found for statement in statements]
        vectors = iter(self.embedder.embed_batch(scopes) if scopes else ())
        return [
            tuple((st.kind, st.text, next(vectors).astype("<f4").tobytes()) for st in statements)
            for statements in found
        ]

    def _check_item(
        self, index: int, item: MemoryInput | Mapping[str, Any], now: datetime, numbered: bool
    ) -> NewMemory:
        try:
            if isinstance(item, Mapping):
                unknown = sorted(map(str, set(item) - _ITEM_FIELDS))
                if unknown:
                    raise InvalidInput(f"unknown field(s) {', '.join(unknown)}", field=unknown[0])
                if "content" not in item:
                    raise InvalidInput("content is missing", field="content")
                item = MemoryInput(**item)
            elif not isinstance(item, MemoryInput):
                raise InvalidInput(
                    f"expected a mapping or MemoryInput, not {type(item).__name__}", index=index
                )
            text = validate.content(item.content)
            recorded = validate.timestamp(item.recorded_at, "recorded_at") or now
            return NewMemory(
                content=text,
                content_hash=content_hash(text),
                event_time=validate.timestamp(item.event_time) or recorded,
                recorded_at=recorded,
                source=validate.source(item.source),
                confidence=validate.confidence(item.confidence),
                metadata=validate.metadata(item.metadata),
                tags=validate.tags(item.tags),
                terms=(),
                vector=b"",
                id=validate.memory_id(item.id) if item.id is not None else None,
            )
        except InvalidInput as exc:
            if numbered:
                raise InvalidInput(f"item {index}: {exc}", field=exc.field, index=index) from None
            raise

    def validate_item(self, item: MemoryInput | Mapping[str, Any]) -> None:
        """Raise :class:`InvalidInput` if ``remember_many`` would reject ``item``; store nothing."""
        self._check_item(0, item, datetime.now(UTC), numbered=False)

    def forget(self, ids: str | Iterable[str]) -> list[str]:
        """Remove memories (and every derived index entry) in one transaction.

        Returns the ids that were removed; ids not in this profile are ignored.
        """
        return self.store.delete(self.profile, validate.memory_ids(ids))

    def feedback(self, memory_id: str, *, useful: bool) -> float:
        """Record whether a recalled memory was useful; updates its source's trust.

        Returns the source's new ``trust_score``.
        """
        record = self.get(memory_id)
        self.store.add_feedback(self.profile, record.source or "", bool(useful))
        return self.source_trust(record.source)

    def source_trust(self, source: str | None) -> float:
        """The ``trust_score`` of a source's memories (docs/scoring.md, "Trust")."""
        name = source or ""
        counts = self.store.source_feedback(self.profile, [name]).get(name, (0, 0))
        return source_trust(*counts, prior=self.settings.trust_prior)

    def reindex(self, batch: int = 500) -> int:
        """Rebuild every derived index of the profile (lexical, entities, dates, graph) from
        the stored memories and their stored embeddings; returns how many were reindexed."""
        self.store.rebuild_vectors(self.profile)
        done, after = 0, 0
        while records := self.store.scan(self.profile, after, batch):
            vectors = self.store.vectors(self.profile, [r.key for r in records])
            # Only a text longer than the model's window has passages beyond its first one
            # (a word piece is at least one character): no other text is embedded again.
            long = [r for r in records if reads_passages(self.embedder, r.content)]
            embedded = embed_passages(self.embedder, [r.content for r in long], MAX_PASSAGES)
            further = {r.key: p[1:] for r, p in zip(long, embedded, strict=True)}
            standing = self._standing([r.content for r in records], [r.source for r in records])
            items = []
            for record, vector, statements in zip(records, vectors, standing, strict=True):
                # Only earlier memories, as at ingest: a rebuild gives the same graph (up to
                # the half-precision rounding of a graph-indexed profile's vectors).
                neighbours = tuple(
                    (key, score)
                    for key, score in self.store.vector_search(
                        self.profile, vector, SEMANTIC_LINKS, None, below=record.key
                    )
                    if score >= SEMANTIC_LINK_FLOOR
                )
                item = _record_as_new(record)
                rest = further.get(record.key)
                passages = vector[None, :] if rest is None else np.vstack([vector[None, :], rest])
                derived = _with_derived(item, passages, neighbours, (), statements)
                items.append((record.key, derived))
            self.store.rederive(self.profile, items)
            done += len(records)
            after = records[-1].key
        return done

    # -- reading ------------------------------------------------------------------------

    def get(self, memory_id: str) -> MemoryRecord:
        found = self.store.get(self.profile, [validate.memory_id(memory_id)])
        if not found:
            raise NotFound(f"no memory with id {memory_id} in profile {self.profile!r}")
        return found[0]

    def get_many(self, memory_ids: Iterable[str]) -> list[MemoryRecord]:
        """The memories with these ids, in the order given; ids not in the profile are
        left out."""
        return self.store.get(self.profile, validate.memory_ids(memory_ids))

    def list(
        self,
        limit: int = 20,
        offset: int = 0,
        *,
        source: str | None = None,
        tags: Sequence[str] = (),
        after: datetime | str | None = None,
        before: datetime | str | None = None,
    ) -> list[MemoryRecord]:
        """Memories, most recently recorded first."""
        limit, offset = validate.limit_offset(limit, offset)
        filters = _filters(source, tags, after, before)
        return self.store.page(self.profile, limit, offset, filters)

    def count(self) -> int:
        return self.store.count(self.profile)

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        trace: bool = False,
        source: str | None = None,
        tags: Sequence[str] = (),
        after: datetime | str | None = None,
        before: datetime | str | None = None,
        channels: Sequence[str] | None = None,
        now: datetime | str | None = None,
    ) -> RecallResponse:
        """The memories most relevant to ``query``, as a score-contract-v2 response.

        Filters (``source``, ``tags`` all present, event time in ``[after, before)``) restrict
        the candidates; ``channels`` restricts which channels run for this call; ``now``
        anchors relative time expressions in the query (default: the current time).
        """
        text = validate.query(query)
        k = validate.k(k)
        filters = _filters(source, tags, after, before)
        settings = self.settings
        if channels is not None:
            settings = settings.with_channels(_channel_names(channels))
        allowed = None
        if not filters.is_empty():
            allowed = frozenset(self.store.allowed_keys(self.profile, filters))
        moment = validate.timestamp(now, "now") or datetime.now(UTC)
        response, runs = read(
            self.store,
            self.channels,
            settings,
            lambda topic: self._queries.submit(self.embedder.embed_batch, [topic]),
            profile=self.profile,
            text=text,
            k=k,
            now=moment,
            filters=filters,
            allowed=allowed,
            want_trace=trace,
        )
        for run in runs:
            if run.error is not None:
                self._channel_errors[run.name] = run.error
            elif run.ran:
                self._channel_errors.pop(run.name, None)
        return response

    def health(self) -> dict[str, Any]:
        """Store, embedder and per-channel health, for startup checks and ``slm health``."""
        counts = self.store.index_counts(self.profile)
        channels = {name: self.channel_health(name, counts) for name in self.channels}
        return {
            "profile": self.profile,
            "memories": counts["memories"],
            "store": self.store.health(),
            "embedder": self.embedder.health(),
            "channels": channels,
        }


def _record_as_new(record: MemoryRecord) -> NewMemory:
    return NewMemory(
        content=record.content,
        content_hash=content_hash(record.content),
        event_time=record.event_time,
        recorded_at=record.recorded_at,
        source=record.source,
        confidence=record.confidence,
        metadata=record.metadata,
        tags=record.tags,
        terms=(),
        vector=b"",
        id=record.id,
    )


def _firsts(passages: Sequence[Matrix], dim: int) -> Matrix:
    """The first passage of each text: its own vector."""
    if not passages:
        return np.zeros((0, dim), dtype=np.float32)
    return np.stack([p[0] for p in passages]).astype(np.float32)


def _with_derived(
    item: NewMemory,
    passages: Matrix,
    links: tuple[tuple[int, float], ...],
    batch_links: tuple[tuple[int, float], ...],
    standing: tuple[tuple[str, str, bytes], ...],
) -> NewMemory:
    derived = derive(item.content, item.event_time, item.metadata)
    return replace(
        item,
        terms=tuple(terms(item.content)),
        vector=passages[0].astype("<f4").tobytes(),
        passages=tuple(p.astype("<f4").tobytes() for p in passages[1:]),
        standing=standing,
        session=derived.session,
        entities=derived.entities,
        spans=derived.spans,
        links=links,
        batch_links=batch_links,
    )


_ITEM_FIELDS = frozenset(
    ["content", "event_time", "source", "confidence", "metadata", "tags", "id", "recorded_at"]
)


def _filters(
    source: str | None,
    tags: Sequence[str],
    after: datetime | str | None,
    before: datetime | str | None,
) -> Filters:
    return Filters(
        source=validate.source(source),
        tags=validate.tags(tags),
        after=validate.timestamp(after, "after"),
        before=validate.timestamp(before, "before"),
    )


def _channel_names(names: object) -> tuple[str, ...]:
    if isinstance(names, str):
        names = names.split(",")
    if not isinstance(names, Iterable) or isinstance(names, bytes | Mapping):
        raise InvalidInput("channels must be a list of channel names", field="channels")
    chosen: dict[str, None] = {}
    for name in names:
        if not isinstance(name, str):
            raise InvalidInput(
                f"channels must be channel names, not {type(name).__name__}", field="channels"
            )
        name = name.strip()
        if name and name not in registered():
            raise InvalidInput(
                f"unknown channel {name[:80]!r}; known: {', '.join(registered())}",
                field="channels",
            )
        if name:
            chosen[name] = None
    cleaned = tuple(chosen)
    if not cleaned:
        raise InvalidInput("channels names no channel", field="channels")
    return cleaned
