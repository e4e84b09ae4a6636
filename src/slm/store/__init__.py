"""Persistence: the :class:`Store` protocol and its implementations."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from slm.store.base import (
    Filters,
    LexicalStats,
    Postings,
    Store,
    Stored,
    Update,
    Vector,
    times_in,
)
from slm.store.relational import Relational

__all__ = [
    "Filters",
    "LexicalStats",
    "Location",
    "Postings",
    "Store",
    "Stored",
    "Update",
    "Vector",
    "open_store",
    "times_in",
]


#: Text that names a PostgreSQL server rather than a file.
DSN_PREFIXES = ("postgresql://", "postgres://")


@dataclass(frozen=True, slots=True)
class Location:
    """Where a store is: a SQLite file (``path``) or a PostgreSQL server (``dsn``), one of
    the two. The one value that says which backend opens."""

    path: Path | None = None
    dsn: str | None = None

    def __post_init__(self) -> None:
        if (self.path is None) == (self.dsn is None):
            raise ValueError("a store location is a path or a DSN, one of the two")

    @classmethod
    def parse(cls, text: str | Path) -> Location:
        """A ``postgresql://`` URL, else a file path (``~`` expanded)."""
        if isinstance(text, str) and text.startswith(DSN_PREFIXES):
            return cls(dsn=text)
        return cls(path=Path(text).expanduser())

    def exists(self) -> bool:
        """Whether there is something to open: a server is assumed to be; a file must be."""
        return self.dsn is not None or (self.path is not None and self.path.exists())


def open_store(location: Location, dim: int, index_dir: Path | None = None) -> Relational:
    """Open the store at ``location``: SQLite for a path, PostgreSQL for a DSN (a
    :class:`Store`, and what the indexes beside it read: :class:`slm.index.Followed`).
    SQLite's indexes are saved beside its file; a PostgreSQL server's in ``index_dir``
    (None: nowhere)."""
    if location.dsn is not None:
        try:
            from slm.store.postgres import PostgresStore
        except ImportError as exc:
            from slm.errors import ConfigError, install_hint

            raise ConfigError(
                f"the PostgreSQL store needs the 'postgres' extra: {install_hint('postgres')}; "
                f"{exc}"
            ) from None
        return PostgresStore(location.dsn, dim=dim, folder=index_dir)
    from slm.store.sqlite import SQLiteStore

    assert location.path is not None
    return SQLiteStore(location.path, dim=dim)
