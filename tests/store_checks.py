"""Whole-store consistency checks for the reliability tests, straight on the SQLite file;
and every memory's edges as the rows of any store hold them (:func:`edge_rows`).

:func:`problems` lists everything that would mean a partial memory or a damaged index: a
failed ``PRAGMA integrity_check``; a memory without its vector, lexical document, postings
or tags; a derived row without its memory; BM25 statistics, document frequencies or entity
mention counts that disagree with the rows they summarise.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

_ORPHANS = {
    "memory without a vector": "SELECT m.key FROM memories m "
    "LEFT JOIN embeddings e ON e.key = m.key AND e.profile = m.profile WHERE e.key IS NULL",
    "memory without a lexical document": "SELECT m.key FROM memories m "
    "LEFT JOIN lex_docs d ON d.key = m.key AND d.profile = m.profile WHERE d.key IS NULL",
    "vector without a memory": "SELECT key FROM embeddings WHERE key NOT IN "
    "(SELECT key FROM memories)",
    "lexical document without a memory": "SELECT key FROM lex_docs WHERE key NOT IN "
    "(SELECT key FROM memories)",
    "posting without a memory": "SELECT key FROM lex_postings WHERE key NOT IN "
    "(SELECT key FROM memories)",
    "tag row without a memory": "SELECT key FROM memory_tags WHERE key NOT IN "
    "(SELECT key FROM memories)",
    "mention without a memory": "SELECT key FROM mentions WHERE key NOT IN "
    "(SELECT key FROM memories)",
    "date without a memory": "SELECT key FROM memory_times WHERE key NOT IN "
    "(SELECT key FROM memories)",
    "edge without a memory": "SELECT src FROM edges WHERE src NOT IN (SELECT key FROM memories) "
    "OR dst NOT IN (SELECT key FROM memories)",
    "edge across profiles": "SELECT e.src FROM edges e JOIN memories a ON a.key = e.src "
    "JOIN memories b ON b.key = e.dst WHERE a.profile != e.profile OR b.profile != e.profile",
    "mention across profiles": "SELECT m.key FROM mentions m JOIN entities e ON e.id = m.entity "
    "JOIN memories x ON x.key = m.key WHERE x.profile != e.profile",
    "passage without a memory": "SELECT memory FROM passages WHERE memory NOT IN "
    "(SELECT key FROM memories)",
    "passage across profiles": "SELECT p.memory FROM passages p JOIN memories m "
    "ON m.key = p.memory WHERE m.profile != p.profile",
    "passage outside its memory's keys": "SELECT key FROM passages WHERE key / 512 != memory",
}


def problems(path: Path) -> list[str]:
    """Everything inconsistent in the store at ``path``; empty when it is whole."""
    with closing(sqlite3.connect(path)) as db:
        found: list[str] = []
        check = db.execute("PRAGMA integrity_check").fetchall()
        if check != [("ok",)]:
            found.append(f"integrity_check: {check[:5]}")
        for what, sql in _ORPHANS.items():
            keys = [r[0] for r in db.execute(sql).fetchall()]
            if keys:
                found.append(f"{what}: {keys[:5]}")
        found += _lexical_problems(db)
        found += _tag_and_entity_problems(db)
        return found


def _lexical_problems(db: sqlite3.Connection) -> list[str]:
    found: list[str] = []
    docs: dict[str, list[int]] = {}
    expected: Counter[tuple[str, int, str]] = Counter()
    df: Counter[tuple[str, str]] = Counter()
    for key, profile, terms in db.execute("SELECT key, profile, terms FROM lex_docs"):
        words = terms.split()
        docs.setdefault(profile, []).append(len(words))
        for term, tf in Counter(words).items():
            expected[(profile, key, term)] = tf
            df[(profile, term)] += 1
    postings = {
        (profile, key, term): tf
        for profile, term, key, tf in db.execute("SELECT profile, term, key, tf FROM lex_postings")
    }
    if postings != dict(expected):
        missing = set(expected) - set(postings)
        extra = set(postings) - set(expected)
        found.append(f"postings differ: {len(missing)} missing, {len(extra)} extra")
    terms = {(p, t): n for p, t, n in db.execute("SELECT profile, term, df FROM lex_terms")}
    if terms != dict(df):
        found.append("document frequencies differ from the postings")
    for profile, n_docs, total in db.execute("SELECT profile, n_docs, total_len FROM lex_stats"):
        lengths = docs.get(profile, [])
        if (n_docs, total) != (len(lengths), sum(lengths)):
            found.append(f"lex_stats of {profile!r} are ({n_docs}, {total}), not "
                         f"({len(lengths)}, {sum(lengths)})")  # fmt: skip
    return found


def _tag_and_entity_problems(db: sqlite3.Connection) -> list[str]:
    found: list[str] = []
    tags = {
        (profile, tag, key)
        for key, profile, listed in db.execute("SELECT key, profile, tags FROM memories")
        for tag in json.loads(listed)
    }
    rows = set(db.execute("SELECT profile, tag, key FROM memory_tags").fetchall())
    if tags != rows:
        found.append("tag rows differ from the memories' tags")
    counts = db.execute(
        "SELECT e.id, e.mentions, count(m.key) FROM entities e LEFT JOIN mentions m "
        "ON m.entity = e.id GROUP BY e.id HAVING e.mentions != count(m.key)"
    ).fetchall()
    if counts:
        found.append(f"entity mention counts are off: {counts[:5]}")
    return found


def count(path: Path, profile: str | None = None) -> int:
    """Memories in the store (in one profile when given), read without opening a Memory."""
    with closing(sqlite3.connect(path)) as db:
        if profile is None:
            return int(db.execute("SELECT count(*) FROM memories").fetchone()[0])
        sql = "SELECT count(*) FROM memories WHERE profile = ?"
        return int(db.execute(sql, (profile,)).fetchone()[0])


def edge_rows(store: Any, profile: str) -> dict[int, tuple[tuple[int, str, float], ...]]:
    """Each memory's edges (neighbour, kind, weight) as the rows hold them, in the order
    ``edges_from`` gives them, read with SQL around any index."""
    mark = store.mark
    out: dict[int, list[tuple[int, str, float]]] = {}
    for src, dst, kind, weight in store.select(
        f"SELECT src, dst, kind, weight FROM edges WHERE profile = {mark}", (profile,)
    ):
        out.setdefault(src, []).append((dst, kind, weight))
    return {key: tuple(sorted(edges)) for key, edges in sorted(out.items())}
