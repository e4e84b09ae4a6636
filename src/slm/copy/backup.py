"""``slm backup``: a consistent copy of a live embedded store.

The SQLite store copies itself with SQLite's online backup API (see
:meth:`slm.store.sqlite.SQLiteStore.backup`): agents may go on writing while it runs, and
the copy holds exactly the memories committed when it started, each whole. A PostgreSQL
store is backed up by the server's own tools (``pg_dump``), not by slm.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from slm.engine import Memory
from slm.errors import ConfigError, InvalidInput
from slm.store.files import refuse_symlink


@runtime_checkable
class _Copyable(Protocol):
    def backup(self, target: Path) -> int: ...


@dataclass(frozen=True, slots=True)
class BackupReport:
    path: str
    memories: int
    bytes: int


def backup(memory: Memory, target: str | Path, *, overwrite: bool = False) -> BackupReport:
    """Copy the store ``memory`` uses (every profile in it) to the file ``target``.

    Refuses an existing ``target`` unless ``overwrite``, and never overwrites the store
    itself. The copy is complete and checked before it appears under ``target``.
    """
    store = memory.store
    if not isinstance(store, _Copyable):
        raise ConfigError(
            f"slm backup copies the embedded SQLite store; back up a {store.kind} store "
            "with its own tools (pg_dump for PostgreSQL)"
        )
    path = target_file(memory, target, overwrite=overwrite, what="backup")
    memories = store.backup(path)
    return BackupReport(path=str(path), memories=memories, bytes=path.stat().st_size)


def target_file(memory: Memory, target: str | Path, *, overwrite: bool, what: str = "copy") -> Path:
    """``target`` as an absolute path a copy of the store (a backup, an export) may be
    written to: a file in an existing folder, not the store nor any file beside it that
    is part of it (its write-ahead log, shared memory, journal, saved indexes), and not
    an existing file unless ``overwrite``. Each refusal is one clear :class:`InvalidInput`."""
    path = Path(os.path.abspath(Path(target).expanduser()))
    if path.is_dir():
        raise InvalidInput(f"{path} is a directory; give the {what}'s file name", field="path")
    if not path.parent.is_dir():
        raise InvalidInput(f"cannot write the {what}: no directory {path.parent}", field="path")
    store = memory.store
    if store.kind == "sqlite" and _is_part_of(path, Path(store.location)):
        raise InvalidInput(f"{path} is the store itself or one of its files", field="path")
    if _is_inside(path, store.folder):
        raise InvalidInput(f"{path} is in the store's index folder {store.folder}", field="path")
    refuse_symlink(path)
    if path.exists() and not overwrite:
        raise InvalidInput(f"{path} exists; use --force to overwrite it", field="path")
    return path


def _is_inside(path: Path, folder: Path | None) -> bool:
    """Whether ``path`` is ``folder`` or anything under it (links followed)."""
    if folder is None:
        return False
    inside = Path(os.path.abspath(folder))
    for candidate in (path, path.resolve()):
        for base in (inside, inside.resolve()):
            if candidate == base or base in candidate.parents:
                return True
    return False


def _is_part_of(path: Path, store: Path) -> bool:
    """Whether ``path`` is the store's file or its write-ahead log, shared memory or journal."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        part = store.with_name(store.name + suffix)
        if path.resolve() == part.resolve():
            return True
        try:
            if os.path.samefile(path, part):
                return True
        except OSError:
            continue
    return False
