"""Query-time view of the lexical index: the postings and statistics of one query's terms,
read from the store at most once per recall and shared by the BM25 channel and the
evidence check.

Postings are read in impact order and cut at :data:`POSTINGS_PER_TERM` per term, so a
common word costs the same at a million memories as at a thousand. A term whose postings
were cut is *truncated*: documents beyond the cut can still be found through the query's
other terms, and the BM25 channel rescores its best candidates exactly from their stored
terms (:meth:`Lexicon.terms_of`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property

from slm.store.base import Lexical, LexicalStats, Postings

#: At most this many postings (the highest-impact ones) are read per query term.
POSTINGS_PER_TERM = 500


def idf(n_docs: int, df: int) -> float:
    """Lucene BM25 inverse document frequency, ``ln(1 + (N - df + 0.5) / (df + 0.5))``;
    always positive."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


class Lexicon:
    def __init__(self, store: Lexical, profile: str, terms: Sequence[str]) -> None:
        self._store = store
        self._profile = profile
        self.terms = tuple(terms)
        self._docs: dict[int, tuple[str, ...]] = {}

    @cached_property
    def stats(self) -> LexicalStats:
        return self._store.lexical_stats(self._profile, self.terms)

    @cached_property
    def postings(self) -> Mapping[str, Postings]:
        if not self.terms:
            return {}
        return self._store.postings(self._profile, self.terms, POSTINGS_PER_TERM)

    @cached_property
    def idf(self) -> Mapping[str, float]:
        stats = self.stats
        return {t: idf(stats.n_docs, stats.df.get(t, 0)) for t in self.terms}

    @cached_property
    def truncated(self) -> frozenset[str]:
        """Terms with more postings than were read."""
        df = self.stats.df
        return frozenset(t for t, p in self.postings.items() if df.get(t, 0) > len(p.keys))

    def prefetch(self) -> None:
        """Read the statistics and postings now (they are otherwise read on first use)."""
        _ = self.stats, self.postings, self.truncated

    @cached_property
    def _holders(self) -> Mapping[str, frozenset[int]]:
        """For each query term whose postings were read whole, the memories holding it."""
        truncated = self.truncated
        return {
            term: frozenset(p.keys.tolist())
            for term, p in self.postings.items()
            if term not in truncated
        }

    def matched(self, keys: Sequence[int]) -> dict[int, set[str]]:
        """The query's terms each memory holds: from the postings where they were read
        whole, from the memories' stored terms only for terms whose postings were cut."""
        holders = self._holders
        out: dict[int, set[str]] = {key: set() for key in keys}
        for term, holding in holders.items():
            for key in holding.intersection(keys):
                out[key].add(term)
        rest = {t for t in self.terms if t not in holders and self.stats.df.get(t, 0) > 0}
        if rest:
            for key, found in self.terms_of(keys).items():
                if key in out:
                    out[key].update(rest.intersection(found))
        return out

    def terms_of(self, keys: Iterable[int]) -> Mapping[int, tuple[str, ...]]:
        """The stored terms of each memory (read once per key per query)."""
        missing = [key for key in dict.fromkeys(keys) if key not in self._docs]
        if missing and self.terms:
            found = self._store.doc_terms(self._profile, missing)
            for key in missing:
                self._docs[key] = tuple(found.get(key, ()))
        return self._docs
