"""BM25 lexical channel over the store's inverted index.

Scoring is Okapi BM25 with the Lucene IDF (the ``bm25s`` default), computed from
statistics the store keeps per profile, so scores do not depend on other profiles::

    idf(t)    = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(d)  = sum_t idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))

with ``k1 = 1.2`` and ``b = 0.75`` by default (settings ``bm25_k1``, ``bm25_b``). Terms come
from :func:`slm.text.terms` (stopwords removed, Snowball stems) on both sides.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from slm.channels.base import Health, Hit, Query, ranked
from slm.lexicon import idf
from slm.settings import Settings
from slm.store import Postings, Store


def term_scores(
    postings: Postings, term_idf: float, avg_len: float, k1: float, b: float
) -> npt.NDArray[np.float32]:
    """BM25 contribution of one term to each document in its postings."""
    norm = k1 * (1.0 - b + b * postings.dl / max(avg_len, 1e-9))
    return (term_idf * postings.tf * (k1 + 1.0) / (postings.tf + norm)).astype(np.float32)


def bm25_scores(
    postings: Mapping[str, Postings],
    n_docs: int,
    df: Mapping[str, int],
    avg_len: float,
    k1: float,
    b: float,
) -> dict[int, float]:
    """Sum of per-term BM25 contributions, for every document containing a query term."""
    totals: dict[int, float] = {}
    for term, plist in postings.items():
        contrib = term_scores(plist, idf(n_docs, df.get(term, len(plist.keys))), avg_len, k1, b)
        for key, value in zip(plist.keys.tolist(), contrib.tolist(), strict=True):
            totals[key] = totals.get(key, 0.0) + value
    return totals


class BM25Channel:
    name = "bm25"
    primary = True

    def __init__(self, store: Store, settings: Settings) -> None:
        self._store = store
        self._k1 = settings.bm25_k1
        self._b = settings.bm25_b

    def health(self) -> Health:
        return Health(True)

    def candidates(self, query: Query, k: int) -> list[Hit]:
        postings = query.lexicon.postings if query.lexicon is not None else {}
        if not postings:
            return []
        assert query.lexicon is not None
        stats = query.lexicon.stats
        totals = bm25_scores(postings, stats.n_docs, stats.df, stats.avg_len, self._k1, self._b)
        if query.allowed is not None:
            totals = {key: s for key, s in totals.items() if key in query.allowed}
        return ranked(list(totals.items()), k)
