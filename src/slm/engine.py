"""``Memory``: the library API. Validates at the boundary, then delegates.

Writing: validate -> hash (idempotent per profile) -> derive (terms, embedding) -> one
store transaction. Reading: interpret the query once -> :func:`slm.recall.run_recall`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from slm import validate
from slm.channels import Channel, Query, build_channels
from slm.contract import RecallResponse
from slm.embed import Embedder, make_embedder
from slm.errors import ChannelUnavailable, ConfigError, InvalidInput, NotFound
from slm.models import MemoryRecord, NewMemory
from slm.recall import run_recall
from slm.settings import ALL_CHANNELS, Settings, default_db_path
from slm.store import Filters, Store, open_store
from slm.text import query_terms, terms

log = logging.getLogger("slm")
log.addHandler(logging.NullHandler())

_EMBEDDER_META = "embedder"


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
            platform's user data directory).
        dsn: a PostgreSQL DSN instead of a file.
        profile: the tenant; memories of other profiles are never seen.
        settings: tunables; default :meth:`Settings.from_env`.
        embedder: an embedder object, overriding ``settings.embedder``.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        dsn: str | None = None,
        profile: str = "default",
        settings: Settings | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings if settings is not None else Settings.from_env()
        self.profile = validate.profile(profile)
        self.embedder = embedder if embedder is not None else make_embedder(self.settings.embedder)
        if path is None and dsn is None:
            path = default_db_path()
        self.store: Store = open_store(path=path, dsn=dsn, dim=self.embedder.dim)
        try:
            self._check_embedder()
            self.channels: dict[str, Channel] = build_channels(self.store, self.settings)
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
            channel = self.channels.get(name)
            if channel is None:
                raise ChannelUnavailable(f"required channel {name!r} is not available")
            if name not in self.settings.channels:
                raise ChannelUnavailable(f"required channel {name!r} is disabled by settings")
            health = channel.health()
            if not health.healthy:
                raise ChannelUnavailable(f"required channel {name!r} is unhealthy: {health.reason}")

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
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
        batch = list(items)
        if len(batch) > validate.MAX_BATCH:
            raise InvalidInput(
                f"{len(batch)} items in one batch; the limit is {validate.MAX_BATCH}"
            )
        now = datetime.now(UTC)
        numbered = len(batch) > 1
        checked = [self._check_item(i, item, now, numbered) for i, item in enumerate(batch)]
        known = self.store.existing(self.profile, [c.content_hash for c in checked])
        pending: dict[str, NewMemory] = {}
        for c in checked:
            if c.content_hash not in known:
                pending.setdefault(c.content_hash, c)
        vectors = self.embedder.embed_batch([c.content for c in pending.values()])
        new_items = [
            replace(c, terms=tuple(terms(c.content)), vector=v.astype("<f4").tobytes())
            for c, v in zip(pending.values(), vectors, strict=True)
        ]
        ids = dict(known)
        if new_items:
            stored = self.store.insert(self.profile, new_items)
            ids.update((n.content_hash, s.id) for n, s in zip(new_items, stored, strict=True))
        records = {r.id: r for r in self.store.get(self.profile, list(set(ids.values())))}
        return [records[ids[c.content_hash]] for c in checked]

    def _check_item(
        self, index: int, item: MemoryInput | Mapping[str, Any], now: datetime, numbered: bool
    ) -> NewMemory:
        try:
            if isinstance(item, Mapping):
                unknown = set(item) - _ITEM_FIELDS
                if unknown:
                    raise InvalidInput(f"unknown field(s) {', '.join(sorted(map(str, unknown)))}")
                if "content" not in item:
                    raise InvalidInput("content is missing")
                item = MemoryInput(**item)
            elif not isinstance(item, MemoryInput):
                raise InvalidInput(f"expected a mapping or MemoryInput, not {type(item).__name__}")
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
                raise InvalidInput(f"item {index}: {exc}") from None
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
        source = record.source or ""
        self.store.add_feedback(self.profile, source, bool(useful))
        counts = self.store.source_feedback(self.profile, [source]).get(source, (0, 0))
        from slm.fusion import source_trust

        return source_trust(*counts, prior=self.settings.trust_prior)

    # -- reading ------------------------------------------------------------------------

    def get(self, memory_id: str) -> MemoryRecord:
        found = self.store.get(self.profile, [validate.memory_id(memory_id)])
        if not found:
            raise NotFound(f"no memory with id {memory_id} in profile {self.profile!r}")
        return found[0]

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
        interpreted = Query(
            text=text,
            profile=self.profile,
            vector=self.embedder.embed_batch([text])[0],
            terms=tuple(query_terms(text)),
            now=validate.timestamp(now, "now") or datetime.now(UTC),
            filters=filters,
            allowed=allowed,
        )
        return run_recall(self.store, self.channels, settings, interpreted, k, want_trace=trace)

    def health(self) -> dict[str, Any]:
        """Store, embedder and per-channel health, for startup checks and ``slm health``."""
        channels: dict[str, dict[str, Any]] = {}
        for name in ALL_CHANNELS:
            channel = self.channels.get(name)
            if channel is None:
                channels[name] = {"healthy": False, "reason": "not available in this version"}
                continue
            health = channel.health()
            channels[name] = {
                "healthy": health.healthy,
                "reason": health.reason,
                "enabled": name in self.settings.channels,
            }
        return {
            "profile": self.profile,
            "memories": self.count(),
            "store": self.store.health(),
            "embedder": self.embedder.health(),
            "channels": channels,
        }


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


def _channel_names(names: Sequence[str]) -> tuple[str, ...]:
    if isinstance(names, str):
        names = names.split(",")
    cleaned = tuple(dict.fromkeys(n.strip() for n in names if n.strip()))
    for name in cleaned:
        if name not in ALL_CHANNELS:
            raise InvalidInput(f"unknown channel {name!r}; known: {', '.join(ALL_CHANNELS)}")
    if not cleaned:
        raise InvalidInput("channels names no channel")
    return cleaned
