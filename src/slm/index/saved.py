"""Where a saved index stands: the watermark an index writes beside its saved files, and
the check made before those files are trusted again (the vector graph, slm.index.vector_cache;
the edge arrays, slm.index.edges).

Saved files are checked before use, as a file anyone may have changed is: the data file
must be the one its manifest names as saved (name, size and SHA-256:
:func:`slm.store.files.data_file`), and what it holds well formed (the edge arrays'
offsets, keys and codes; the graph's dimension, keys and tombstones). One that fails is
not used: the index is built from the rows, with one warning (:func:`untrusted`).

A watermark names the format, the database (its ``store_id``), the profile, the feed's
sequence number the files reflect, and the highest memory key they hold with that memory's
id. Saved files are trusted only when all of that still holds: the same format, database
and profile, a sequence number the feed has reached, and the same memory at that key (a
database restored from an older copy under the same identity fails one of the two).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from slm.store import feed

log = logging.getLogger(__name__)

#: The format of saved manifests: one of another format is not used.
FORMAT = "feed-1"

Select = Callable[[str, Sequence[Any]], list[Any]]


def _id_of(select: Select, mark: str, key: int) -> str | None:
    rows = select(f"SELECT id FROM memories WHERE key = {mark}", (key,))
    return str(rows[0][0]) if rows else None


def watermark(
    select: Select, mark: str, store_id: str, profile: str, seq: int, max_key: int
) -> dict[str, Any]:
    """What files saved at ``seq``, holding memories up to ``max_key``, are saved with."""
    return {
        "format": FORMAT,
        "store_id": store_id,
        "profile": profile,
        "seq": seq,
        "max_key": max_key,
        "last_id": _id_of(select, mark, max_key),
    }


def belongs(
    select: Select, mark: str, store_id: str, profile: str, manifest: Mapping[str, Any]
) -> bool:
    """Whether a saved manifest describes this database's profile at a point its feed has
    passed, the last memory it holds still being the one it held."""
    try:
        seq, max_key = int(manifest["seq"]), int(manifest["max_key"])
        same = (manifest["format"], manifest["store_id"], manifest["profile"])
    except (KeyError, TypeError, ValueError):
        return False
    if same != (FORMAT, store_id, profile):
        return False
    last = _id_of(select, mark, max_key)
    if last is not None and last != manifest.get("last_id", last):
        return False  # the key now holds another memory: not the rows this was saved from
    return seq <= feed.head(select, mark, profile)


def untrusted(what: str, profile: str, reason: Exception) -> None:
    """Say, once per file found so, that a saved index failed its check before use and is
    built from the rows instead (nothing is lost: the rows are the truth)."""
    log.warning(
        "slm: the saved %s of profile %r failed its check (%s); building them from the rows",
        what,
        profile,
        reason,
    )
