"""Plain data objects passed between the layers: stored memories and memories to store."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, overload


def content_hash(text: str, scope: str = "") -> str:
    """What identifies a memory within its profile: its text within its scope
    (:func:`scope_of`). Storing the same text in the same scope again is a no-op; the same
    text in another scope is another memory. A memory with no scope hashes its text alone."""
    data = text if not scope else f"{scope}\x00{text}"
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


#: The metadata keys that scope a memory unless settings say otherwise
#: (``Settings.scope_keys``): Mem0's user, agent and run ids, an agent host's project (the hooks,
#: docs/hooks.md), and the levels of a LangGraph
#: namespace (a key ending in ``*`` names every key that starts with what comes before it).
SCOPE_KEYS: tuple[str, ...] = ("user_id", "agent_id", "run_id", "project", "lg_ns.*")


def scope_of(metadata: Mapping[str, Any], keys: Sequence[str]) -> str:
    """Who a memory belongs to within its profile: its metadata's values under the scope
    ``keys``, as canonical JSON (ASCII, keys sorted), or ``""`` when it has none of them.
    Memories of different scopes are never the same memory and are never linked."""
    exact = {key for key in keys if not key.endswith("*")}
    prefixes = tuple(key[:-1] for key in keys if key.endswith("*"))
    held = {k: v for k, v in metadata.items() if k in exact or k.startswith(prefixes)}
    return json.dumps(held, sort_keys=True, separators=(",", ":")) if held else ""


def iso(moment: datetime) -> str:
    """UTC ISO 8601 with a ``Z`` suffix, the one timestamp format slm emits."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def to_micros(moment: datetime) -> int:
    """Microseconds since the Unix epoch: exact, sortable, and an integer in both stores."""
    delta = moment.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    from datetime import timedelta

    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A stored memory as the API returns it. ``key`` is the store's internal row key."""

    id: str
    content: str
    event_time: datetime
    recorded_at: datetime
    source: str | None
    confidence: float
    metadata: Mapping[str, Any]
    tags: tuple[str, ...]
    key: int = field(default=0, repr=False, compare=False)
    #: from when the memory holds (default: its event time)
    valid_from: datetime | None = None
    #: until when it held: set when a newer memory supersedes it; None while it is current
    valid_to: datetime | None = None
    #: the id of the memory that superseded it
    superseded_by: str | None = None
    #: who it belongs to within the profile (:func:`scope_of`), read from its metadata
    scope: str = field(default="", repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "event_time": iso(self.event_time),
            "recorded_at": iso(self.recorded_at),
            "source": self.source,
            "confidence": self.confidence,
            "metadata": dict(self.metadata),
            "tags": list(self.tags),
            "valid_from": iso(self.starts),
            "valid_to": iso(self.valid_to) if self.valid_to is not None else None,
            "superseded_by": self.superseded_by,
        }

    @property
    def starts(self) -> datetime:
        """When the memory starts to hold: ``valid_from``, else its event time."""
        return self.valid_from or self.event_time


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A validated memory ready for the store: everything derived is computed before insert."""

    content: str
    content_hash: str
    event_time: datetime
    recorded_at: datetime
    source: str | None
    confidence: float
    metadata: Mapping[str, Any]
    tags: tuple[str, ...]
    terms: tuple[str, ...]
    vector: bytes
    id: str | None = None
    #: who it belongs to within the profile (:func:`scope_of`); part of its identity
    scope: str = ""
    session: str | None = None
    #: (entity key, kind, is_speaker) for each entity the text mentions.
    entities: tuple[tuple[str, str, bool], ...] = ()
    #: (start, end) in microseconds since the epoch, for each date the text refers to.
    spans: tuple[tuple[int, int], ...] = ()
    #: (existing key, cosine) of strong semantic neighbours already stored.
    links: tuple[tuple[int, float], ...] = ()
    #: (index in the same batch, cosine) of strong semantic neighbours inserted alongside.
    batch_links: tuple[tuple[int, float], ...] = ()
    #: (earlier memory, in the same batch?, evidence, sure?) of each probable change found by
    #: meaning (``slm.ingest.changes``): a stored key, or an index in the same batch.
    changes: tuple[tuple[int, bool, str, bool], ...] = ()
    #: vectors (little-endian float32) of the text's passages after the first, in order.
    passages: tuple[bytes, ...] = ()
    #: (kind, statement, vector) of each standing instruction or preference the text states.
    standing: tuple[tuple[str, str, bytes], ...] = ()
    #: from when it holds (None: its event time) and until when (None: current)
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    superseded_by: str | None = None
    #: ids of memories of the profile this one replaces, in the same transaction
    supersedes: tuple[str, ...] = ()
    #: (slot, value) of each single-valued fact the text states (``slm.ingest.facts``)
    facts: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Remembered:
    """What a write did with one item (``remember``, ``remember_many``, ``update``): the
    stored memory, whether this call stored it (False: identical content was already
    there), the memories it replaces by the caller's word (``supersedes``, ``update``) and
    those it probably updates (found by slm; with the ``auto`` policy, superseded too).

    It reads as the stored memory as well (``done.id``, ``done.content``...), so code that
    only wants the record keeps working.
    """

    memory: MemoryRecord
    created: bool
    #: ids of stored memories this one probably updates (found by slm, not said)
    updates: tuple[str, ...] = ()
    #: ids of stored memories this one replaces because the caller said so
    replaced: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.memory, name)

    def __eq__(self, other: object) -> bool:
        """Equal to another answer with the same fields, and to its stored record."""
        if isinstance(other, MemoryRecord):
            return self.memory == other
        if isinstance(other, Remembered):
            return (self.memory, self.created, self.updates, self.replaced) == (
                other.memory, other.created, other.updates, other.replaced,
            )  # fmt: skip
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a record holds metadata, a dict

    def to_dict(self) -> dict[str, Any]:
        """The memory's fields, with ``created``, ``replaced`` and ``updates``."""
        return {
            **self.memory.to_dict(),
            "created": self.created,
            "replaced": list(self.replaced),
            "updates": list(self.updates),
        }


@dataclass(frozen=True, slots=True)
class RememberedConversation(Sequence[Remembered]):
    """What :meth:`Memory.remember_conversation` did: a :class:`Remembered` for each message
    stored, in order (it reads as that list: ``done[0].id``, ``len(done)``), and how many
    system messages with text it left out (``system="skip"``, the default)."""

    memories: tuple[Remembered, ...]
    system_skipped: int = 0

    @overload
    def __getitem__(self, index: int) -> Remembered: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Remembered]: ...
    def __getitem__(self, index: int | slice) -> Remembered | Sequence[Remembered]:
        return self.memories[index]

    def __len__(self) -> int:
        return len(self.memories)

    def to_dict(self) -> dict[str, Any]:
        return {
            "memories": [m.to_dict() for m in self.memories],
            "system_skipped": self.system_skipped,
        }


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """One recall as every surface asks for it: the question and its options
    (:meth:`slm.Memory.recall` documents each; they are checked when the recall runs).
    ``Memory.recall`` builds one from its keywords, every adapter builds one from what it
    was given, and the recall log keeps it (:meth:`to_log`) for feedback to replay."""

    query: str
    k: int = 10
    trace: bool = False
    source: str | None = None
    tags: Sequence[str] = ()
    after: datetime | str | None = None
    before: datetime | str | None = None
    channels: Sequence[str] | None = None
    now: datetime | str | None = None
    include_superseded: bool = False
    as_of: datetime | str | None = None
    metadata: Mapping[str, Any] | str | None = None
    #: results whose ``relevance_score`` is below it are left out (None: none are)
    min_relevance: float | None = None
    #: only this user's, agent's, run's memories (merged into ``metadata``; docs/scopes.md)
    user_id: str | int | None = None
    agent_id: str | int | None = None
    run_id: str | int | None = None
    #: values of the store's other scope keys
    scope: Mapping[str, Any] | str | None = None

    def __post_init__(self) -> None:
        # Iterables are read once, here: a generator is used up by the first reading.
        for name in ("tags", "channels"):
            value = getattr(self, name)
            if isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping):
                object.__setattr__(self, name, tuple(value))

    def to_log(self) -> dict[str, Any]:
        """What the recall log keeps of it: every option but ``trace`` (``metadata``,
        ``min_relevance`` and the scope only when given), times as ISO 8601 text."""
        out: dict[str, Any] = {}
        for name in LOGGED_OPTIONS:
            value = getattr(self, name)
            if (name in _LOGGED_WHEN_GIVEN and value is None) or (name == "metadata" and not value):
                continue
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, tuple):
                value = list(value)
            out[name] = value
        return out

    @classmethod
    def from_log(cls, data: Mapping[str, Any]) -> RecallRequest:
        """A request the log kept (:meth:`to_log`), an option it lacks at its default (logs
        written before the option existed); TypeError for a field it does not know."""
        return cls(**data)


#: Options the recall log keeps only when they are given (older logs lack them).
_LOGGED_WHEN_GIVEN = frozenset({"min_relevance", "user_id", "agent_id", "run_id", "scope"})
#: The options of a :class:`RecallRequest` the recall log keeps, the question included.
LOGGED_OPTIONS: tuple[str, ...] = tuple(f.name for f in fields(RecallRequest) if f.name != "trace")
