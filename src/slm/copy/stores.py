"""Copy a whole store into another, either way between SQLite and PostgreSQL (``slm migrate``).

Every memory of every profile keeps its id, content, event and recorded times, source,
confidence, metadata, tags and validity (``valid_from``, ``valid_to``, ``superseded_by``),
and its stored vector: nothing is embedded again. Nothing is superseded on the way (the
target's ``update_policy`` does not apply to a copy). Derived
data (lexical index, entities, referenced dates, graph) is rebuilt on the way in by the
engine's own insert path, :meth:`Memory.remember_many`, in the source's key order, which
gives the graph ``slm reindex`` would. Feedback counts (a source's trust) are raised to the
source store's, never added twice; those of a source none of whose memories remain are
not copied.

Resumable: memories are copied in batches, one transaction each, and a memory whose
content the target profile already holds is skipped, so re-running an interrupted copy
copies exactly what is missing. An id already taken in the target by other content is
replaced by a fresh one (counted as ``renamed``; a ``superseded_by`` naming it follows).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from slm.embed import Embedder, Matrix, PassageEmbedder
from slm.engine import Memory, MemoryInput, content_hash
from slm.errors import EmbedderError, InvalidInput
from slm.ingest.standing import standing_statements
from slm.models import MemoryRecord, scope_of
from slm.settings import Settings
from slm.store import Location

BATCH = 500


@dataclass(frozen=True, slots=True)
class CopyReport:
    """What copying one profile did: memories read from the source, copied, already in
    the target, and copied under a new id because theirs was taken."""

    profile: str
    read: int
    copied: int
    existing: int
    renamed: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class StoredVectors:
    """An embedder that hands back vectors computed before: the source store's (a memory's
    passages, and the scopes of its standing statements). The target's insert path then
    runs unchanged. A text the source holds no vector for (a standing statement of a memory
    stored before statements were recognised) is embedded by ``model``, the source's own
    embedder."""

    def __init__(self, model: Embedder) -> None:
        self.name = model.name
        self.dim = model.dim
        self.window = model.window if isinstance(model, PassageEmbedder) else 2**62
        self._model = model
        self._passages: dict[str, Matrix] = {}
        self._scopes: dict[str, Matrix] = {}

    def load(self, records: Sequence[MemoryRecord], vectors: Matrix, source: Memory) -> None:
        """The stored vectors of ``records`` (``vectors``: their own, in order)."""
        keys = [r.key for r in records]
        further = source.indexes.vectors.passages(source.profile, keys)
        standing = source.indexes.vectors.passages(source.profile, keys, standing=True)
        self._passages, self._scopes = {}, {}
        for record, vector in zip(records, vectors, strict=True):
            rest = further.get(record.key)
            self._passages[record.content] = (
                vector[None, :] if rest is None else np.vstack([vector[None, :], rest])
            )
            scopes = [s.scope for s in standing_statements(record.content, record.source)]
            stored = standing.get(record.key, np.zeros((0, self.dim), dtype=np.float32))
            if len(stored) == len(scopes):
                self._scopes.update(zip(scopes, stored, strict=True))

    def embed_passages(self, texts: Sequence[str], limit: int) -> list[Matrix]:
        try:
            return [self._passages[text][:limit] for text in texts]
        except KeyError:
            raise EmbedderError("a memory being copied has no stored vector") from None

    def embed_batch(self, texts: Sequence[str]) -> Matrix:
        missing = [text for text in dict.fromkeys(texts) if text not in self._scopes]
        if missing:
            self._scopes.update(zip(missing, self._model.embed_batch(missing), strict=True))
        rows = [self._scopes[text] for text in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dim)

    def health(self) -> dict[str, object]:
        return {"name": self.name, "dim": self.dim, "healthy": True, "reason": None}


def migrate(
    source: str | Path,
    target: str | Path,
    *,
    profiles: Sequence[str] | None = None,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    batch: int = BATCH,
    progress: Callable[[int], None] | None = None,
) -> list[CopyReport]:
    """Copy ``profiles`` (default: every profile) from the store at ``source`` to the one
    at ``target`` (paths or ``postgresql://`` URLs); see the module docstring.

    ``settings`` and ``embedder`` open the source as usual: the embedder must be the one
    the source was built with (its vectors are copied, not recomputed).
    """
    settings = settings if settings is not None else Settings.from_env()
    origin, destination = Location.parse(source), Location.parse(target)
    if origin == destination:
        raise InvalidInput("--from and --to name the same store")
    if origin.path is not None and not origin.path.is_file():
        raise InvalidInput(f"no store at {origin.path}")
    # A copy keeps the source's validity as it is: nothing is superseded on the way.
    faithful = replace(settings, update_policy="suggest")
    with Memory(origin, settings=settings, embedder=embedder) as first:
        names = list(profiles) if profiles is not None else first.store.profiles()
        model = first.embedder
        reports = []
        for profile in names:
            copier = StoredVectors(model)
            with (
                Memory(origin, profile=profile, settings=settings, embedder=model) as src,
                Memory(destination, profile=profile, settings=faithful, embedder=copier) as dst,
            ):
                reports.append(copy_profile(src, dst, copier, batch=batch, progress=progress))
    return reports


def copy_profile(
    source: Memory,
    target: Memory,
    vectors: StoredVectors,
    *,
    batch: int = BATCH,
    progress: Callable[[int], None] | None = None,
) -> CopyReport:
    """Copy one profile; ``target`` must have been opened with ``vectors`` as its embedder."""
    read = copied = 0
    renames: dict[str, str] = {}
    sources: set[str] = set()
    after = 0
    while records := source.store.scan(source.profile, after, batch):
        after = records[-1].key
        read += len(records)
        sources.update(r.source or "" for r in records)
        keys = target.scope_keys()
        digests = [content_hash(r.content, scope_of(r.metadata, keys)) for r in records]
        present = target.store.existing(target.profile, digests)
        missing = [r for r, digest in zip(records, digests, strict=True) if digest not in present]
        if missing:
            stored = source.indexes.vectors.get(source.profile, [r.key for r in missing])
            vectors.load(missing, stored, source)
            added = target.remember_many([_as_input(r) for r in missing])
            copied += len(missing)
            renames.update((old.id, new.id) for new, old in zip(added, missing, strict=True))
        if progress is not None:
            progress(len(records))
    renames = {old: new for old, new in renames.items() if old != new}
    renamed = len(renames)
    if renames:
        _follow_renames(target, renames)
    _copy_feedback(source, target, sources)
    return CopyReport(source.profile, read, copied, read - copied, renamed)


def _as_input(record: MemoryRecord) -> MemoryInput:
    return MemoryInput(
        content=record.content,
        event_time=record.event_time,
        source=record.source,
        confidence=record.confidence,
        metadata=dict(record.metadata),
        tags=record.tags,
        id=record.id,
        recorded_at=record.recorded_at,
        valid_from=record.valid_from,
        valid_to=record.valid_to,
        superseded_by=record.superseded_by,
    )


def _follow_renames(target: Memory, renames: dict[str, str]) -> None:
    """Point ``superseded_by`` at the new id of a memory that was copied under another id."""
    after = 0
    while records := target.store.scan(target.profile, after, BATCH):
        after = records[-1].key
        for record in records:
            new = renames.get(record.superseded_by or "")
            if new is not None and record.valid_to is not None:
                target.store.versions.supersede(target.profile, new, [record.id], record.valid_to)


def _copy_feedback(source: Memory, target: Memory, sources: set[str]) -> None:
    """Raise the target's feedback counts to the source's (so a re-run adds nothing)."""
    have = target.store.feedback.trust(target.profile, sources)
    for name, counts in source.store.feedback.trust(source.profile, sources).items():
        for useful, wanted, present in zip(
            (True, False), counts, have.get(name, (0, 0)), strict=True
        ):
            for _ in range(wanted - present):
                target.store.feedback.add(target.profile, name, useful)
