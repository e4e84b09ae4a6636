"""A memory to remember: :class:`MemoryInput`, and its validation into the store's
:class:`slm.models.NewMemory` (fields checked, content hashed)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

from slm import validate
from slm.errors import InvalidInput
from slm.inputs import scope as owners
from slm.models import NewMemory, content_hash, scope_of


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
    #: ids of stored memories this one replaces (docs/lifecycle.md)
    supersedes: Sequence[str] = field(default_factory=tuple)
    #: from when it holds (default: ``event_time``)
    valid_from: datetime | str | None = None
    #: until when it held, and what replaced it (an export's validity, carried by import)
    valid_to: datetime | str | None = None
    superseded_by: str | None = None
    #: whose memory it is (merged into ``metadata``; :mod:`slm.inputs.scope`)
    user_id: owners.OwnerId = None
    agent_id: owners.OwnerId = None
    run_id: owners.OwnerId = None
    #: values of the store's other scope keys
    scope: Mapping[str, Any] | str | None = None


def check_item(
    index: int,
    item: MemoryInput | Mapping[str, Any],
    now: datetime,
    numbered: bool,
    scope_keys: Sequence[str] = (),
) -> NewMemory:
    """``item`` (position ``index`` of a batch) validated into a memory to store, its
    scope read from its metadata under ``scope_keys`` and its derived fields still empty;
    :class:`InvalidInput` naming the field otherwise."""
    try:
        if isinstance(item, Mapping):
            unknown = sorted(map(str, set(item) - ITEM_FIELDS))
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
        event_time = validate.timestamp(item.event_time) or recorded
        valid_from = validate.timestamp(item.valid_from, "valid_from")
        valid_to = validate.timestamp(item.valid_to, "valid_to")
        superseded_by = item.superseded_by
        if superseded_by is not None:
            superseded_by = validate.memory_id(superseded_by, "superseded_by")
        if valid_to is not None and valid_to < (valid_from or event_time):
            raise InvalidInput("valid_to must not be before valid_from", field="valid_to")
        if superseded_by is not None and valid_to is None:
            raise InvalidInput("superseded_by needs valid_to", field="superseded_by")
        owner = owners.given(scope_keys, item.user_id, item.agent_id, item.run_id, item.scope)
        metadata = validate.metadata(owners.into_metadata(item.metadata, owner))
        scope = scope_of(metadata, scope_keys)
        return NewMemory(
            content=text,
            content_hash=content_hash(text, scope),
            scope=scope,
            event_time=event_time,
            recorded_at=recorded,
            source=validate.source(item.source),
            confidence=validate.confidence(item.confidence),
            metadata=metadata,
            tags=validate.tags(item.tags),
            terms=(),
            vector=b"",
            id=validate.memory_id(item.id) if item.id is not None else None,
            valid_from=valid_from,
            valid_to=valid_to,
            superseded_by=superseded_by,
            supersedes=validate.supersedes(item.supersedes),
        )
    except InvalidInput as exc:
        if numbered:
            raise InvalidInput(f"item {index}: {exc}", field=exc.field, index=index) from None
        raise


def owned_items(items: Iterable[Any], owner: Mapping[str, Any]) -> Iterator[Any]:
    """The items of a batch (``MemoryInput`` or mappings) with the owner of the whole batch
    merged into each one's metadata; anything else as it is, for the batch's check."""
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise InvalidInput("items must be a list of memories", field="items")
    for item in items:
        if isinstance(item, MemoryInput):
            yield replace(item, metadata=owners.into_metadata(item.metadata, owner))
        elif isinstance(item, Mapping):
            yield {**item, "metadata": owners.into_metadata(item.get("metadata"), owner)}
        else:
            yield item


#: The fields an item may have.
ITEM_FIELDS = frozenset(f.name for f in fields(MemoryInput))
#: What an export line holds of them (all but ``supersedes`` and the scope given by name,
#: which an export's metadata holds).
EXPORTED_FIELDS = ITEM_FIELDS - {"supersedes", *owners.NAMED, "scope"}
