"""Query-time view of the lexical index: the postings and statistics of one query's terms,
read from the store at most once per recall and shared by the BM25 channel and the
evidence check."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cached_property

from slm.store import LexicalStats, Postings, Store


def idf(n_docs: int, df: int) -> float:
    """Lucene BM25 inverse document frequency, ``ln(1 + (N - df + 0.5) / (df + 0.5))``;
    always positive."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


class Lexicon:
    def __init__(self, store: Store, profile: str, terms: Sequence[str]) -> None:
        self._store = store
        self._profile = profile
        self.terms = tuple(terms)

    @cached_property
    def stats(self) -> LexicalStats:
        return self._store.lexical_stats(self._profile, self.terms)

    @cached_property
    def postings(self) -> Mapping[str, Postings]:
        return self._store.postings(self._profile, self.terms) if self.terms else {}

    @cached_property
    def idf(self) -> Mapping[str, float]:
        stats = self.stats
        return {t: idf(stats.n_docs, stats.df.get(t, 0)) for t in self.terms}

    @cached_property
    def containing(self) -> Mapping[str, frozenset[int]]:
        """Keys of the memories containing each term."""
        return {t: frozenset(p.keys.tolist()) for t, p in self.postings.items()}

    def terms_in(self, key: int) -> set[str]:
        """The query's terms that memory ``key`` contains."""
        return {t for t in self.terms if key in self.containing.get(t, ())}
