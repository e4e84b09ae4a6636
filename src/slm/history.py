"""The history of a memory (Mem0's ``history(id)``): what it replaced, what replaced it,
when, and whether each link was stated or probable; and the current version of it.

A link is **stated** when a caller said so (``supersedes=``, ``update``): the older memory
ended and names the newer as ``superseded_by``. It is **probable** when slm found it at
write time (a newer value of a fact the older states, or a change found by meaning;
docs/lifecycle.md) and left the older memory standing unless ``SLM_UPDATE_POLICY=auto``
superseded it. The **chain** follows stated links both ways, from the first version to the
current one, so an id a caller holds is always one call from what replaced it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slm.models import MemoryRecord, iso
from slm.store import Store
from slm.store.base import Update

#: How a link was made.
STATED = "stated"
PROBABLE = "probable"
#: The longest chain followed (a guard: a chain is never this long by design).
MAX_CHAIN = 1000


@dataclass(frozen=True, slots=True)
class Link:
    """Memory ``newer`` replaces memory ``older``, stated or probably, from ``at``."""

    older: MemoryRecord
    newer: MemoryRecord
    kind: str
    #: when the newer memory starts to hold
    at: str
    #: for a probable link, what it rests on: the fact's slot or the change's evidence
    evidence: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "older": _brief(self.older),
            "newer": _brief(self.newer),
            "kind": self.kind,
            "at": self.at,
            "evidence": self.evidence,
        }


@dataclass(frozen=True, slots=True)
class History:
    """What :meth:`slm.Memory.history` answers for one memory."""

    memory: MemoryRecord
    #: links where this memory is the newer: what it replaced
    replaced: tuple[Link, ...]
    #: links where this memory is the older: what replaced it
    replaced_by: tuple[Link, ...]
    #: the versions joined by stated links, first to current (this memory among them)
    chain: tuple[MemoryRecord, ...]

    @property
    def current(self) -> MemoryRecord:
        """The version that holds now by stated links (this memory, when nothing
        replaced it)."""
        return self.chain[-1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory": self.memory.to_dict(),
            "current": self.current.id,
            "chain": [_brief(r) for r in self.chain],
            "replaced": [link.to_dict() for link in self.replaced],
            "replaced_by": [link.to_dict() for link in self.replaced_by],
        }


def history(store: Store, profile: str, record: MemoryRecord) -> History:
    """The history of ``record`` (a memory of ``profile``)."""
    chain = _chain(store, profile, record)
    keys = [record.key, *store.versions.replaced(profile, record.id)]
    updates = store.versions.updates(profile, keys)
    stated = {(u.older, u.newer) for u in updates if u.explicit}
    # a pair linked both ways is the stated link (the probable one found the same change)
    touching = [
        u
        for u in updates
        if record.key in (u.older, u.newer) and (u.explicit or (u.older, u.newer) not in stated)
    ]
    records = store.get_by_keys(profile, {k for u in touching for k in (u.older, u.newer)})
    links = [_link(u, records) for u in touching if u.older in records and u.newer in records]
    return History(
        record,
        tuple(sorted((ln for ln in links if ln.newer.key == record.key), key=_when)),
        tuple(sorted((ln for ln in links if ln.older.key == record.key), key=_when)),
        chain,
    )


def _chain(store: Store, profile: str, record: MemoryRecord) -> tuple[MemoryRecord, ...]:
    """The stated versions of ``record``: back through what it superseded (the first,
    when it superseded several), then on through ``superseded_by`` to the current one."""
    before: list[MemoryRecord] = []
    seen = {record.key}
    current = record
    while len(seen) < MAX_CHAIN:
        older = store.versions.replaced(profile, current.id)
        found = store.get_by_keys(profile, older[:1])
        if not found or older[0] in seen:
            break
        current = found[older[0]]
        seen.add(current.key)
        before.append(current)
    after: list[MemoryRecord] = []
    current = record
    while current.superseded_by is not None and len(seen) < MAX_CHAIN:
        newer = store.get(profile, [current.superseded_by])
        if not newer or newer[0].key in seen:
            break
        current = newer[0]
        seen.add(current.key)
        after.append(current)
    return (*reversed(before), record, *after)


def _link(update: Update, records: dict[int, MemoryRecord]) -> Link:
    return Link(
        records[update.older],
        records[update.newer],
        STATED if update.explicit else PROBABLE,
        iso(update.newer_from),
        update.slot or None,
    )


def _when(link: Link) -> tuple[str, str]:
    return (link.at, link.newer.id)


def _brief(record: MemoryRecord) -> dict[str, Any]:
    """A version as a history lists it: its id, text and times."""
    return {
        "id": record.id,
        "content": record.content,
        "recorded_at": iso(record.recorded_at),
        "valid_from": iso(record.starts),
        "valid_to": iso(record.valid_to) if record.valid_to is not None else None,
        "superseded_by": record.superseded_by,
    }
