"""Persistence: the :class:`Store` protocol and its implementations."""

from __future__ import annotations

from pathlib import Path

from slm.store.base import Filters, LexicalStats, Postings, Store, Stored, Vector

__all__ = ["Filters", "LexicalStats", "Postings", "Store", "Stored", "Vector", "open_store"]


def open_store(*, path: str | Path | None, dsn: str | None, dim: int) -> Store:
    """Open the SQLite store at ``path``, or the server store named by ``dsn``."""
    if dsn is not None:
        from slm.errors import ConfigError

        raise ConfigError("the PostgreSQL store is not available in this version of slm")
    from slm.store.sqlite import SQLiteStore

    assert path is not None
    return SQLiteStore(path, dim=dim)
