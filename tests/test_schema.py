"""The schema written once (:mod:`slm.store.schema`) builds, version by version, the schema
each store's released migrations built, and a store at any version migrates to the schema
of a fresh one.

``tests/data/schema-versions.json`` holds those schemas as each store reads them back
(SQLite's ``sqlite_master`` with the statements' layout left out; PostgreSQL's columns and
indexes), every version as its change from the one before. A new migration appends its
step: ``python tests/test_schema.py`` writes the file again from the code, and the diff
shows the new step alone.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from postgres_server import DIM, Server

from slm.store import schema
from slm.store.postgres import PostgresStore
from slm.store.sqlite import SQLiteStore

DATA = Path(__file__).parent / "data"
REFERENCE = DATA / "schema-versions.json"


def tokens(sql: str) -> str:
    """The statement's words, with its layout left out."""
    return re.sub(r"\s*([(),])\s*", r"\1", " ".join(sql.split()))


def sqlite_schema(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as db:
        found = {"version": str(db.execute("PRAGMA user_version").fetchone()[0])}
        rows = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name")
        for type_, name, table, sql in rows.fetchall():
            # an index a constraint made has no statement: its columns tell it
            shape = sql or ",".join(r[2] for r in db.execute(f"PRAGMA index_info({name})"))
            found[f"{type_} {name}"] = f"on {table}: {tokens(shape)}"
    db.close()
    return found


_COLUMNS = """
    SELECT c.table_name, c.column_name, c.ordinal_position, format_type(a.atttypid, a.atttypmod),
        c.is_nullable, c.column_default, c.collation_name, c.identity_generation
    FROM information_schema.columns c JOIN pg_attribute a
        ON a.attrelid = to_regclass(quote_ident(c.table_name)) AND a.attname = c.column_name
    WHERE c.table_schema = 'public'
"""


def postgres_schema(dsn: str) -> dict[str, str]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        (versions,) = conn.execute(
            "SELECT coalesce(array_agg(version ORDER BY version), '{}') FROM slm_schema"
        ).fetchone() or ([],)
        (extensions,) = conn.execute(
            "SELECT array_agg(extname ORDER BY extname) FROM pg_extension"
        ).fetchone() or ([],)
        found = {"version": " ".join(map(str, versions)), "extensions": " ".join(extensions)}
        for table, column, position, type_, nullable, *named in conn.execute(_COLUMNS):
            words = zip(("DEFAULT", "COLLATE", "IDENTITY"), named, strict=True)
            found[f"column {table}.{column}"] = " ".join(
                [f"{position} {type_}", "NULL" if nullable == "YES" else "NOT NULL"]
                + [f"{word} {value}" for word, value in words if value]
            )
        for name, table, definition in conn.execute(
            "SELECT indexname, tablename, indexdef FROM pg_indexes WHERE schemaname = 'public'"
        ):
            found[f"index {name}"] = f"on {table}: {definition}"
    return found


def released(kind: str) -> list[dict[str, str]]:
    """The schema after each version of ``kind``'s store, from the reference."""
    schemas: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for step in json.loads(REFERENCE.read_text(encoding="utf-8"))[kind]:
        current = {k: v for k, v in current.items() if k not in step["drop"]} | step["set"]
        schemas.append(current)
    return schemas


@contextmanager
def up_to(version: int | None) -> Iterator[None]:
    """Stores opened meanwhile migrate to ``version`` and no further (None: to the last)."""
    every = schema.versions
    with pytest.MonkeyPatch.context() as patch:
        if version is not None:
            patch.setattr(schema, "versions", lambda dialect, dim: every(dialect, dim)[:version])
        yield


def sqlite_at(path: Path, version: int | None = None) -> dict[str, str]:
    """The schema of the SQLite store at ``path``, once opened at ``version``."""
    with up_to(version):
        SQLiteStore(path, dim=DIM).close()
    return sqlite_schema(path)


def postgres_at(dsn: str, version: int | None = None) -> dict[str, str]:
    """The schema of the PostgreSQL store at ``dsn``, once opened at ``version``."""
    with up_to(version):
        PostgresStore(dsn, dim=DIM).close()
    return postgres_schema(dsn)


def test_the_sqlite_store_builds_each_released_schema_and_migrates_from_it(
    tmp_path: Path,
) -> None:
    fresh = sqlite_at(tmp_path / "fresh.db")
    versions = released("sqlite")
    assert len(versions) == len(schema.versions(SQLiteStore.dialect, DIM))
    assert fresh == versions[-1]
    for number, wanted in enumerate(versions, 1):
        path = tmp_path / f"at-{number}.db"
        assert sqlite_at(path, number) == wanted, number
        assert sqlite_at(path) == fresh, number


def test_a_store_of_release_0_5_0_migrates_to_the_fresh_schema(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(DATA / "store-0.5.0.sqlite", path)
    assert sqlite_schema(path)["version"] == "11"
    assert sqlite_at(path) == sqlite_at(tmp_path / "fresh.db")


def test_the_postgres_store_builds_each_released_schema_and_migrates_from_it(
    postgres_server: Server,
) -> None:
    fresh = postgres_at(postgres_server.empty_database())
    versions = released("postgres")
    assert len(versions) == len(schema.versions(PostgresStore.dialect, DIM))
    assert fresh == versions[-1]
    for number, wanted in enumerate(versions, 1):
        dsn = postgres_server.empty_database()
        assert postgres_at(dsn, number) == wanted, number
        assert postgres_at(dsn) == fresh, number
        postgres_server.drop_database(dsn)


def steps(schemas: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Each schema as its change from the one before (the first from nothing)."""
    out: list[dict[str, Any]] = []
    before: dict[str, str] = {}
    for now in schemas:
        changed = {k: v for k, v in now.items() if before.get(k) != v}
        out.append({"drop": sorted(set(before) - set(now)), "set": changed})
        before = now
    return out


def write_reference(folder: Path, server: Server) -> None:
    """The reference as the code builds it."""
    lite = [
        sqlite_at(folder / f"{n}.db", n)
        for n in range(1, len(schema.versions(SQLiteStore.dialect, DIM)) + 1)
    ]
    pg = [
        postgres_at(server.empty_database(), n)
        for n in range(1, len(schema.versions(PostgresStore.dialect, DIM)) + 1)
    ]
    text = json.dumps({"postgres": steps(pg), "sqlite": steps(lite)}, indent=1, sort_keys=True)
    REFERENCE.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    import tempfile

    server = Server()
    try:
        write_reference(Path(tempfile.mkdtemp()), server)
    finally:
        server.stop()
