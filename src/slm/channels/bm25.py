"""BM25 lexical channel over the store's inverted index.

Scoring is Okapi BM25 with the Lucene IDF (the ``bm25s`` default), computed from
statistics the store keeps per profile, so scores do not depend on other profiles::

    idf(t)    = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(d)  = sum_t idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))

with ``k1 = 1.2`` and ``b = 0.75`` by default (settings ``bm25_k1``, ``bm25_b``). Terms come
from :func:`slm.ingest.text.terms` (stopwords removed, Snowball stems) on both sides.

At scale a common term's postings are read only up to a cut (highest impact first, see
:mod:`slm.channels.postings`); candidates then come from the partial sums, and the best
``RESCORED`` are rescored exactly from their stored terms.

Hits scoring below ``MIN_SHARE_OF_BEST`` of the best hit are dropped. Fusion sees ranks, not
scores, so a memory matching only a word found nearly everywhere (in a chat, the name of the
person asked about) would otherwise take the next rank after the real matches and the
fusion credit that goes with it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from slm.channels.base import ChannelDefaults, Context, Hit, Need, Role, ranked, ranked_arrays
from slm.channels.postings import idf
from slm.settings import Settings
from slm.store import Postings

#: Where a common term's postings were cut, this many best candidates are rescored exactly.
RESCORED = 100
#: A filter admitting at most this many memories is scored whole when postings were cut.
FILTERED_EXACT = 4096
#: Hits below this share of the best hit's score are not candidates (measured on LoCoMo dev:
#: hit@10 +0.01 at 0.2, the same at 0.1-0.3).
MIN_SHARE_OF_BEST = 0.2


def term_scores(
    postings: Postings, term_idf: float, avg_len: float, k1: float, b: float
) -> npt.NDArray[np.float32]:
    """BM25 contribution of one term to each document in its postings."""
    norm = k1 * (1.0 - b + b * postings.dl / max(avg_len, 1e-9))
    return (term_idf * postings.tf * (k1 + 1.0) / (postings.tf + norm)).astype(np.float32)


def bm25_arrays(
    postings: Mapping[str, Postings],
    n_docs: int,
    df: Mapping[str, int],
    avg_len: float,
    k1: float,
    b: float,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """(keys, scores): the sum of per-term BM25 contributions for every document in the
    postings, as parallel arrays (keys ascending)."""
    if not postings:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    keys = np.concatenate([p.keys for p in postings.values()])
    contrib = np.concatenate(
        [
            term_scores(p, idf(n_docs, df.get(term, len(p.keys))), avg_len, k1, b)
            for term, p in postings.items()
        ]
    ).astype(np.float64)
    unique, where = np.unique(keys, return_inverse=True)
    totals: npt.NDArray[np.float64] = np.bincount(where, weights=contrib).astype(np.float64)
    return unique.astype(np.int64), totals


def exact_scores(
    docs: Mapping[int, Sequence[str]],
    terms: Sequence[str],
    n_docs: int,
    df: Mapping[str, int],
    avg_len: float,
    k1: float,
    b: float,
) -> dict[int, float]:
    """BM25 of each document from its full term list (used where postings were cut): the
    documents' own postings for the query's terms, scored as :func:`bm25_arrays` does."""
    wanted = dict.fromkeys(terms)
    rows: dict[str, list[tuple[int, int, int]]] = {}
    for key, doc in docs.items():
        for term, tf in Counter(t for t in doc if t in wanted).items():
            rows.setdefault(term, []).append((key, tf, len(doc)))
    postings = {term: Postings.of(entries) for term, entries in rows.items()}
    keys, scores = bm25_arrays(postings, n_docs, df, avg_len, k1, b)
    return dict(zip(keys.tolist(), scores.tolist(), strict=True))


class BM25Channel(ChannelDefaults):
    name: ClassVar[str] = "bm25"
    weight: ClassVar[float] = 0.75
    needs: ClassVar[frozenset[Need]] = frozenset()
    role: ClassVar[Role] = "plain"
    index: ClassVar[str | None] = "lexical"

    def __init__(self, settings: Settings) -> None:
        self._k1 = settings.bm25_k1
        self._b = settings.bm25_b

    def candidates(self, context: Context, k: int) -> list[Hit]:
        query, lexicon = context.query, context.lexicon
        if not lexicon.postings:
            return []
        stats = lexicon.stats
        args = (stats.n_docs, stats.df, stats.avg_len, self._k1, self._b)
        keys, scores = bm25_arrays(lexicon.postings, *args)
        if query.allowed is not None:
            admitted = np.isin(keys, np.fromiter(query.allowed, dtype=np.int64))
            keys, scores = keys[admitted], scores[admitted]
        if not lexicon.truncated:
            return _strong(ranked_arrays(keys, scores, k))
        if query.allowed is not None and len(query.allowed) <= FILTERED_EXACT:
            # A narrow filter: its memories may all lie beyond the cut, so score them all.
            leaders = sorted(query.allowed)
        else:
            n = max(RESCORED, k)
            leaders = [hit.key for hit in ranked_arrays(keys, scores, n)]
        exact = exact_scores(lexicon.terms_of(leaders), lexicon.terms, *args)
        return _strong(ranked([(key, s) for key in leaders if (s := exact.get(key, 0.0)) > 0.0], k))


def _strong(hits: list[Hit]) -> list[Hit]:
    """The hits scoring at least ``MIN_SHARE_OF_BEST`` of the first (best) one."""
    if not hits:
        return hits
    floor = MIN_SHARE_OF_BEST * hits[0].score
    return [hit for hit in hits if hit.score >= floor]
