"""The rows a memory derives, written and removed once for both databases.

Beside its own row and vector, a memory owns:

- its lexical rows: its terms (``lex_docs``); per term its frequency and the memory's
  length (``lex_postings``); and its share of the profile's statistics, each term's
  document frequency (``lex_terms``) and the number and total length of documents
  (``lex_stats``). The BM25 channel scores from these in Python (:mod:`slm.channels.bm25`),
  so both stores rank alike;
- its graph rows: the entities it mentions (``entities``, ``mentions``), the dates its text
  refers to (``memory_times``), and edges to other memories stored in both directions
  (``edges``): ``next``/``prev`` between neighbouring turns, ``similar`` between strong
  semantic neighbours (weight = cosine);
- its further vectors (``passages``): its passages beyond the first, for a text longer
  than the model reads, and its standing statements (keys: :data:`PASSAGE_SPAN`).

Every function runs inside the caller's write transaction. A row found by a memory's key
needs no profile condition: no two profiles share a key.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from slm.models import NewMemory
from slm.store.base import PASSAGE_SPAN, STANDING_BASE, Cursor
from slm.store.dialect import Dialect

Fresh = Sequence[tuple[int, NewMemory]]


def insert(cur: Cursor, d: Dialect, profile: str, fresh: Fresh, rederive: bool = False) -> None:
    """The derived rows of memories just stored (``rederive``: of stored memories whose
    derived rows were removed, whose session may have changed). Every edge added names one
    of them (slm.index.edges reads the edges of written memories from that)."""
    if not fresh:
        return
    if rederive:
        cur.executemany(
            f"UPDATE memories SET session = {d.mark} WHERE key = {d.mark}",
            [(m.session, key) for key, m in fresh],
        )
    _insert_lexical(cur, d, profile, fresh)
    d.insert_mentions(cur, profile, fresh)
    rows = [(key, profile, start, end) for key, m in fresh for start, end in m.spans]
    head = "INSERT INTO memory_times (key, profile, start_us, end_us)"
    d.many(cur, head, rows, ("bigint", "text", "bigint", "bigint"))
    _insert_edges(cur, d, profile, fresh)
    insert_passages(cur, d, profile, fresh)


def delete(
    cur: Cursor, d: Dialect, profile: str, key: int, terms: list[str] | None, relink: bool = True
) -> None:
    """Remove one memory's lexical and graph rows (not its passages, vector or row);
    ``terms`` None means it has no lexical rows. With ``relink`` its previous and next
    turns become neighbours: a forgotten turn leaves no gap in the conversation (both had an
    edge to it, which is how slm.index.edges knows to read them again)."""
    m = d.mark
    turns = dict(
        cur.execute(
            f"SELECT kind, dst FROM edges WHERE src = {m} AND kind IN ('prev', 'next')", (key,)
        ).fetchall()
    )
    cur.execute(f"DELETE FROM edges WHERE src = {m}", (key,))
    cur.execute(f"DELETE FROM edges WHERE dst = {m}", (key,))
    if relink and "prev" in turns and "next" in turns:
        prev, nxt = turns["prev"], turns["next"]
        _link(cur, d, profile, {(prev, nxt, "next"): 1.0, (nxt, prev, "prev"): 1.0})
    mentioned = cur.execute(f"SELECT entity FROM mentions WHERE key = {m}", (key,)).fetchall()
    entities = [(row[0],) for row in mentioned]
    cur.execute(f"DELETE FROM mentions WHERE key = {m}", (key,))
    cur.executemany(f"UPDATE entities SET mentions = mentions - 1 WHERE id = {m}", entities)
    cur.executemany(f"DELETE FROM entities WHERE id = {m} AND mentions <= 0", entities)
    cur.execute(f"DELETE FROM memory_times WHERE key = {m}", (key,))
    if terms is not None:
        _delete_lexical(cur, d, profile, key, terms)


def insert_passages(cur: Cursor, d: Dialect, profile: str, fresh: Fresh) -> None:
    rows: list[tuple[int, int, str, str, str | None, object]] = []
    for key, item in fresh:
        base = key * PASSAGE_SPAN
        rows += [
            (base + ordinal, key, profile, "passage", None, d.vector(vector))
            for ordinal, vector in enumerate(item.passages, start=1)
        ]
        rows += [
            (base + ordinal, key, profile, kind, text, d.vector(vector))
            for ordinal, (kind, text, vector) in enumerate(item.standing, start=STANDING_BASE)
        ]
    if rows:
        marks = ", ".join([d.mark] * 6)
        cur.executemany(
            f"INSERT INTO passages (key, memory, profile, kind, text, vector) VALUES ({marks})",
            rows,
        )


def delete_passages(cur: Cursor, d: Dialect, keys: Sequence[int]) -> None:
    for part in d.slices(keys):
        among, values = d.among("memory", part)
        cur.execute(f"DELETE FROM passages WHERE {among}", values)


def _insert_lexical(cur: Cursor, d: Dialect, profile: str, fresh: Fresh) -> None:
    docs = [(key, profile, " ".join(m.terms)) for key, m in fresh]
    d.many(cur, "INSERT INTO lex_docs (key, profile, terms)", docs, ("bigint", "text", "text"))
    postings: list[tuple[str, str, int, int, int]] = []
    df, total = Counter[str](), 0
    for key, m in fresh:
        counts = Counter(m.terms)
        total += len(m.terms)
        df.update(counts.keys())
        postings += [(profile, t, key, tf, len(m.terms)) for t, tf in counts.items()]
    d.many(
        cur,
        "INSERT INTO lex_postings (profile, term, key, tf, dl)",
        postings,
        ("text", "text", "bigint", "int", "int"),
    )
    d.many(
        cur,
        "INSERT INTO lex_terms (profile, term, df)",
        [(profile, term, df[term]) for term in sorted(df)],
        ("text", "text", "int"),
        "ON CONFLICT (profile, term) DO UPDATE SET df = lex_terms.df + excluded.df",
    )
    mark = d.mark
    cur.execute(
        f"INSERT INTO lex_stats (profile, n_docs, total_len) VALUES ({mark}, {mark}, {mark}) "
        "ON CONFLICT (profile) DO UPDATE SET n_docs = lex_stats.n_docs + excluded.n_docs, "
        "total_len = lex_stats.total_len + excluded.total_len",
        (profile, len(fresh), total),
    )


def _delete_lexical(cur: Cursor, d: Dialect, profile: str, key: int, terms: list[str]) -> None:
    m = d.mark
    distinct = sorted(set(terms))
    counts = Counter(terms)
    cur.executemany(
        f"DELETE FROM lex_postings WHERE profile = {m} AND term = {m} AND tf = {m} "
        f"AND dl = {m} AND key = {m}",
        [(profile, t, counts[t], len(terms), key) for t in distinct],
    )
    cur.executemany(
        f"UPDATE lex_terms SET df = df - 1 WHERE profile = {m} AND term = {m}",
        [(profile, t) for t in distinct],
    )
    cur.executemany(
        f"DELETE FROM lex_terms WHERE profile = {m} AND term = {m} AND df <= 0",
        [(profile, t) for t in distinct],
    )
    cur.execute(
        f"UPDATE lex_stats SET n_docs = n_docs - 1, total_len = total_len - {m} "
        f"WHERE profile = {m}",
        (len(terms), profile),
    )
    cur.execute(f"DELETE FROM lex_docs WHERE key = {m}", (key,))


def _insert_edges(cur: Cursor, d: Dialect, profile: str, fresh: Fresh) -> None:
    keys = [key for key, _ in fresh]
    edges: dict[tuple[int, int, str], float] = {}
    previous = d.previous_turns(cur, profile, fresh)
    for key, memory in fresh:
        if key in previous:
            edges[(previous[key], key, "next")] = 1.0
            edges[(key, previous[key], "prev")] = 1.0
        neighbours = list(memory.links)
        neighbours += [(keys[i], w) for i, w in memory.batch_links if keys[i] != key]
        for other, weight in neighbours:
            edges[(key, other, "similar")] = weight
            edges[(other, key, "similar")] = weight
    _link(cur, d, profile, edges)


def _link(cur: Cursor, d: Dialect, profile: str, edges: dict[tuple[int, int, str], float]) -> None:
    """Insert edges, replacing the weight of those that exist."""
    d.many(
        cur,
        "INSERT INTO edges (profile, src, dst, kind, weight)",
        [(profile, src, dst, kind, w) for (src, dst, kind), w in edges.items()],
        ("text", "bigint", "bigint", "text", "float8"),
        "ON CONFLICT (src, dst, kind) DO UPDATE SET weight = excluded.weight",
    )
