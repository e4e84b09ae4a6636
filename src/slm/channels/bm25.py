"""BM25 lexical channel over the store's inverted index.

Scoring is Okapi BM25 with the Lucene IDF (the ``bm25s`` default), computed from
statistics the store keeps per profile, so scores do not depend on other profiles::

    idf(t)    = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(d)  = sum_t idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))

with ``k1 = 1.2`` and ``b = 0.75`` by default (settings ``bm25_k1``, ``bm25_b``). Terms come
from :func:`slm.text.terms` (stopwords removed, Snowball stems) on both sides.

At scale a common term's postings are read only up to a cut (highest impact first, see
:mod:`slm.lexicon`); candidates then come from the partial sums, and the best
``RESCORED`` are rescored exactly from their stored terms.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from slm.channels.base import Health, Hit, Query, ranked
from slm.lexicon import idf
from slm.settings import Settings
from slm.store import Postings, Store

#: Where a common term's postings were cut, this many best candidates are rescored exactly.
RESCORED = 200


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
    if not postings:
        return {}
    keys = np.concatenate([p.keys for p in postings.values()])
    contrib = np.concatenate(
        [
            term_scores(p, idf(n_docs, df.get(term, len(p.keys))), avg_len, k1, b)
            for term, p in postings.items()
        ]
    ).astype(np.float64)
    unique, where = np.unique(keys, return_inverse=True)
    totals = np.bincount(where, weights=contrib)
    return dict(zip(unique.tolist(), totals.tolist(), strict=True))


def exact_scores(
    docs: Mapping[int, Sequence[str]],
    terms: Sequence[str],
    n_docs: int,
    df: Mapping[str, int],
    avg_len: float,
    k1: float,
    b: float,
) -> dict[int, float]:
    """BM25 of each document from its full term list (used where postings were cut)."""
    wanted = dict.fromkeys(terms)
    weights = {t: idf(n_docs, df.get(t, 1)) for t in wanted}
    out: dict[int, float] = {}
    for key, doc in docs.items():
        counts = Counter(t for t in doc if t in wanted)
        norm = k1 * (1.0 - b + b * len(doc) / max(avg_len, 1e-9))
        out[key] = sum(weights[t] * tf * (k1 + 1.0) / (tf + norm) for t, tf in counts.items())
    return out


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
        lexicon = query.lexicon
        if lexicon is None or not lexicon.postings:
            return []
        stats = lexicon.stats
        args = (stats.n_docs, stats.df, stats.avg_len, self._k1, self._b)
        totals = bm25_scores(lexicon.postings, *args)
        if query.allowed is not None:
            totals = {key: s for key, s in totals.items() if key in query.allowed}
        if lexicon.truncated:
            best = [hit.key for hit in ranked(list(totals.items()), max(RESCORED, k))]
            totals = exact_scores(lexicon.terms_of(best), lexicon.terms, *args)
            totals = {key: totals[key] for key in best}
        return ranked(list(totals.items()), k)
