"""SQL for the BM25 inverted index of the PostgreSQL store.

The same rows as the SQLite store keeps: per memory its terms (``lex_docs``); per term
and memory the term frequency and document length (``lex_postings``); per profile each
term's document frequency (``lex_terms``) and the number and total length of documents
(``lex_stats``). The BM25 channel scores from these in Python (:mod:`slm.channels.bm25`),
so both stores rank identically; PostgreSQL's own ``ts_rank`` is not BM25 and is not used.
Functions take a cursor, inside the caller's transaction for writes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from psycopg import Cursor

from slm.models import NewMemory
from slm.store.base import LexicalStats, Postings
from slm.store.postgres_graph import columns


def insert(cur: Cursor[Any], profile: str, fresh: Sequence[tuple[int, NewMemory]]) -> None:
    """Index new (or re-derived) memories and update the profile's statistics."""
    cur.execute(
        "INSERT INTO lex_docs (profile, key, terms) SELECT %s, * FROM "
        "unnest(%s::bigint[], %s::text[])",
        (profile, [key for key, _ in fresh], [" ".join(m.terms) for _, m in fresh]),
    )
    postings: list[tuple[str, int, int, int]] = []
    df, total = Counter[str](), 0
    for key, m in fresh:
        counts = Counter(m.terms)
        total += len(m.terms)
        df.update(counts.keys())
        postings.extend((t, key, tf, len(m.terms)) for t, tf in counts.items())
    cur.execute(
        "INSERT INTO lex_postings (profile, term, key, tf, dl) SELECT %s, * FROM "
        "unnest(%s::text[], %s::bigint[], %s::int[], %s::int[])",
        (profile, *columns(postings, 4)),
    )
    terms = sorted(df)
    cur.execute(
        "INSERT INTO lex_terms (profile, term, df) SELECT %s, * FROM "
        "unnest(%s::text[], %s::int[]) ON CONFLICT (profile, term) "
        "DO UPDATE SET df = lex_terms.df + excluded.df",
        (profile, terms, [df[t] for t in terms]),
    )
    cur.execute(
        "INSERT INTO lex_stats (profile, n_docs, total_len) VALUES (%s, %s, %s) "
        "ON CONFLICT (profile) DO UPDATE SET n_docs = lex_stats.n_docs + excluded.n_docs, "
        "total_len = lex_stats.total_len + excluded.total_len",
        (profile, len(fresh), total),
    )


def delete(cur: Cursor[Any], profile: str, key: int, terms: Sequence[str]) -> None:
    """Remove one memory (whose terms are ``terms``) from the index and the statistics."""
    distinct = sorted(set(terms))
    cur.execute(
        "DELETE FROM lex_postings WHERE profile = %s AND term = ANY(%s) AND key = %s",
        (profile, distinct, key),
    )
    # One statement: the two parts touch disjoint rows (a statement may not change a row
    # twice), so terms this memory was the last to use go and the others count down.
    cur.execute(
        "WITH gone AS (DELETE FROM lex_terms WHERE profile = %s AND term = ANY(%s) "
        "AND df <= 1) UPDATE lex_terms SET df = df - 1 WHERE profile = %s "
        "AND term = ANY(%s) AND df > 1",
        (profile, distinct, profile, distinct),
    )
    cur.execute(
        "UPDATE lex_stats SET n_docs = n_docs - 1, total_len = total_len - %s WHERE profile = %s",
        (len(terms), profile),
    )
    cur.execute("DELETE FROM lex_docs WHERE profile = %s AND key = %s", (profile, key))


def postings(
    cur: Cursor[Any], profile: str, terms: Sequence[str], limit: int
) -> dict[str, Postings]:
    """Each term's ``limit`` postings of highest impact (see ``Store.postings``)."""
    cur.execute(
        "SELECT t.term, p.key, p.tf, p.dl FROM unnest(%s::text[]) AS t(term) "
        "CROSS JOIN LATERAL (SELECT key, tf, dl FROM lex_postings WHERE profile = %s "
        "AND term = t.term ORDER BY tf DESC, dl, key LIMIT %s) AS p",
        (list(dict.fromkeys(terms)), profile, limit),
    )
    grouped: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for term, key, tf, dl in cur.fetchall():
        grouped[term].append((key, tf, dl))
    return {term: Postings.of(rows) for term, rows in grouped.items()}


def doc_terms(cur: Cursor[Any], profile: str, keys: Sequence[int]) -> dict[int, list[str]]:
    cur.execute(
        "SELECT key, terms FROM lex_docs WHERE profile = %s AND key = ANY(%s)",
        (profile, list(keys)),
    )
    return {key: terms.split() for key, terms in cur.fetchall()}


def stats(cur: Cursor[Any], profile: str, terms: Sequence[str]) -> LexicalStats:
    cur.execute("SELECT n_docs, total_len FROM lex_stats WHERE profile = %s", (profile,))
    n_docs, total = cur.fetchone() or (0, 0)
    cur.execute(
        "SELECT term, df FROM lex_terms WHERE profile = %s AND term = ANY(%s)",
        (profile, list(dict.fromkeys(terms))),
    )
    df = dict(cur.fetchall())
    return LexicalStats(n_docs, total / n_docs if n_docs else 0.0, df)
