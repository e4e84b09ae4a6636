"""Persistence: the :class:`Store` protocol and its implementations."""

from __future__ import annotations

from pathlib import Path

from slm.store.base import Filters, LexicalStats, Postings, Store, Stored, Vector, times_in

__all__ = [
    "Filters",
    "LexicalStats",
    "Postings",
    "Store",
    "Stored",
    "Vector",
    "open_store",
    "times_in",
]


def open_store(*, path: str | Path | None, dsn: str | None, dim: int) -> Store:
    """Open the SQLite store at ``path``, or the server store named by ``dsn``."""
    if dsn is not None:
        try:
            from slm.store.postgres import PostgresStore
        except ImportError as exc:
            from slm.errors import ConfigError, install_hint

            raise ConfigError(
                f"the PostgreSQL store needs the 'postgres' extra: {install_hint('postgres')}; "
                f"{exc}"
            ) from None
        return PostgresStore(dsn, dim=dim)
    from slm.store.sqlite import SQLiteStore

    assert path is not None
    return SQLiteStore(path, dim=dim)
