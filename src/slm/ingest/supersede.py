"""The rules of explicit replacement, checked before anything is written.

A new memory may supersede stored memories of its profile (``remember(...,
supersedes=[ids])``, ``Memory.update``). Each superseded memory stops holding when the
new one starts (its ``valid_from``, else its event time) and names it in
``superseded_by``; it stays readable and exportable. The rules, so that versions form
chains and never cycles:

- the memory superseded exists in the profile (else :class:`NotFound`);
- it is still current: a memory already superseded is replaced through its newer version
  (this is also what keeps a supersession from closing a cycle);
- the new memory is not the memory it supersedes (same content), and is itself current
  (identical content already stored and superseded cannot replace anything);
- it does not start before the memory it supersedes;
- no memory is superseded twice in one batch;
- it is of the new memory's own scope (``slm.models.scope_of``): one user's memory never
  replaces another's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from slm.errors import InvalidInput, NotFound
from slm.models import MemoryRecord, NewMemory


def check(
    profile: str,
    items: Sequence[NewMemory],
    targets: Mapping[str, MemoryRecord],
    existing: Mapping[str, MemoryRecord],
) -> None:
    """Raise if any item's ``supersedes`` breaks a rule. ``targets``: the stored memories
    named (by id); ``existing``: stored memories with an item's content (by content hash)."""
    claimed: dict[str, str] = {}
    for item in items:
        stored = existing.get(item.content_hash)
        for id_ in item.supersedes:
            older = targets.get(id_)
            if older is None:
                raise NotFound(f"no memory with id {id_} in profile {profile!r} to supersede")
            if older.scope != item.scope:
                raise InvalidInput(
                    f"memory {id_} belongs to another scope than the new memory: a memory "
                    "replaces only memories of its own scope (docs/scopes.md)",
                    field="supersedes",
                )
            if stored is not None and stored.id == id_:
                raise InvalidInput(
                    f"memory {id_} cannot supersede itself: the new content is identical",
                    field="supersedes",
                )
            if older.superseded_by is not None:
                raise InvalidInput(
                    f"memory {id_} is already superseded by {older.superseded_by}; "
                    "supersede that one instead",
                    field="supersedes",
                )
            if stored is not None and stored.superseded_by is not None:
                raise InvalidInput(
                    f"this content is stored as memory {stored.id}, which is superseded by "
                    f"{stored.superseded_by}: superseding {id_} with it would make a cycle",
                    field="supersedes",
                )
            start = stored.starts if stored is not None else item.valid_from or item.event_time
            if start < older.starts:
                raise InvalidInput(
                    f"the new memory starts ({start.isoformat()}) before memory {id_} "
                    f"({older.starts.isoformat()}); it cannot supersede it",
                    field="supersedes",
                )
            if claimed.setdefault(id_, item.content_hash) != item.content_hash:
                raise InvalidInput(
                    f"memory {id_} is superseded twice in one batch", field="supersedes"
                )
