"""What a recall reads of each memory, kept in memory between recalls while the store has
not changed: the memory itself, its entities, its times and its terms (its edges are held
apart, as arrays: slm.index.edges).

Every recall reads these rows again for the memories it ranks (tens to hundreds of them,
mostly the same ones from question to question), and reading them through SQL is a large
part of a recall's time after the question's embedding. The store stays the truth: the
cache is emptied by every write of the store's own connection and whenever another
connection committed (``version``: SQLite's ``PRAGMA data_version``, PostgreSQL's feed head
of the profile, slm.store.feed), checked on every read, or once for all the reads of one
recall (:meth:`ReadCache.pinned`). A fetch that
overlapped a write of this process is returned but not kept, so a value read before a commit
never outlives it.

One write is common enough to be worth more care: storing new memories, which an agent does
between most of its recalls. It leaves most of what is kept about the memories already
there as it was (their text, times, terms and mentions), and the store says so
(:class:`Kept`): the next recall reads again only what the new memories changed (the
entities' counts and members, the updates), 7.6 ms instead of 9.4 on a LoCoMo conversation,
against 7.3 when nothing was written.

Besides memories, it keeps what recall reads of the lexical index for a question's terms
(their postings, each term's document frequency, the profile's document count), keyed by
term: a term asked about once is usually asked about again (a name, a topic), and its
postings are the longest read of a recall (up to 500 rows for a common term). Any write of
memories drops them (new memories add postings).

Memory is bounded: each kind keeps at most :data:`LIMIT` keys (postings:
:data:`POSTINGS_LIMIT` terms, about 16 MB at most), the oldest read leaving first.
``ReadCache(None)`` keeps nothing and reads through every time.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

V = TypeVar("V")
K = TypeVar("K", int, str)

#: Memories kept per kind of row (records, entities, times, ...) across all profiles.
LIMIT = 20_000
#: Terms whose postings are kept, across all profiles (each at most 500 postings of 16
#: bytes in keys, tf and dl: 16 MB at most).
POSTINGS_LIMIT = 2_000

_ABSENT: Any = object()


@dataclass
class Kept:
    """What a write of this process to ``profile`` left valid: the ``kinds`` whose kept
    rows are as they were, except those of the keys in ``changed`` (by kind)."""

    profile: str
    kinds: Collection[str] = ()
    changed: Mapping[str, Collection[int]] = field(default_factory=dict)


class ReadCache:
    """Rows per memory key, valid while ``version(profile)`` is unchanged and this process
    did not write (:meth:`clear`); without ``version``, nothing is kept."""

    def __init__(self, version: Callable[[str], int] | None, limit: int = LIMIT) -> None:
        self._version = version
        self._calls = itertools.count()  # without ``version``: a new number every time
        self._seen: dict[str, int] = {}
        self._limit = limit
        self._generation = 0
        self._lock = threading.Lock()
        self._kinds: dict[str, dict[tuple[str, int | str], Any]] = {}
        self._local = threading.local()  # .pinned: the profile this thread pinned

    def clear(self, kept: Kept | None = None) -> None:
        """This process wrote: nothing kept may be read again, except what ``kept`` names.
        A fetch under way is not kept either way."""
        with self._lock:
            self._generation += 1
            if kept is None:
                self._kinds.clear()
                return
            for kind in list(self._kinds):
                if kind not in kept.kinds:
                    del self._kinds[kind]
            for kind, keys in kept.changed.items():
                rows = self._kinds.get(kind, {})
                for key in keys if rows else ():
                    rows.pop((kept.profile, key), None)

    def advance(self, profile: str, seq: int) -> None:
        """This process's write to ``profile`` committed as its version ``seq`` (a store
        whose version counts its own writes too): what :meth:`clear` kept stays, unless
        another process wrote before it, unseen."""
        with self._lock:
            if self._seen.get(profile) == seq - 1:
                self._seen[profile] = seq

    def keyed(
        self,
        kind: str,
        profile: str,
        keys: Iterable[K],
        fetch: Callable[[list[K]], dict[K, V]],
        limit: int | None = None,
    ) -> dict[K, V]:
        """``fetch(keys)`` for the keys not kept, the kept values for the rest; keys with
        no row stay out of the answer, as they do from ``fetch``. In key order, as the
        stores' indexes answer. At most ``limit`` keys of this kind are kept (default
        :data:`LIMIT`)."""
        if self._version is None:
            return fetch(list(dict.fromkeys(keys)))
        if getattr(self._local, "pinned", None) != profile:
            self._follow(profile)
        generation = self._generation
        kept = self._kinds.setdefault(kind, {})
        found: dict[K, V] = {}
        missing: list[K] = []
        for key in dict.fromkeys(keys):
            value = kept.get((profile, key), _ABSENT)
            if value is _ABSENT:
                missing.append(key)
            elif value is not None:
                found[key] = value
        if not missing:
            return dict(sorted(found.items()))
        fetched = fetch(missing)
        with self._lock:
            if generation == self._generation:
                for key in missing:
                    kept[(profile, key)] = fetched.get(key)
                for _ in range(len(kept) - (self._limit if limit is None else limit)):
                    del kept[next(iter(kept))]
        found.update(fetched)
        return dict(sorted(found.items()))

    def value(self, kind: str, profile: str, fetch: Callable[[], V]) -> V:
        """One value per profile (``fetch()`` once while nothing changes)."""
        return self.keyed(kind, profile, (0,), lambda _: {0: fetch()})[0]

    @contextmanager
    def pinned(self, profile: str) -> Iterator[None]:
        """Other connections' commits to ``profile`` checked once for every read this
        thread makes of it inside (a recall's twenty-odd): one that commits meanwhile is
        seen from the next check on, so nothing read before it outlives the recall. Writes
        of this process still empty the cache at once."""
        if self._version is None or getattr(self._local, "pinned", None) is not None:
            yield
            return
        self._local.version = self._follow(profile)
        self._local.pinned = profile
        try:
            yield
        finally:
            self._local.pinned = None

    def version(self, profile: str) -> int:
        """What tells whether ``profile`` changed: as checked when this thread pinned it,
        else read now (the store's ``version``, which slm.index follows, is built on it).
        Without ``version``, a new number every time: anything may have changed."""
        if self._version is None:
            return next(self._calls)
        if getattr(self._local, "pinned", None) == profile:
            return int(self._local.version)
        return self._version(profile)

    def _follow(self, profile: str) -> int:
        """Empty the cache when another connection committed to ``profile`` since it was
        last read; the version read."""
        assert self._version is not None
        version = self._version(profile)
        if version != self._seen.get(profile):
            self.clear()
            self._seen[profile] = version
        return version
