"""Editing a user's configuration files as one transaction: every file is read and
parsed, and every change computed, before anything is written (a file that cannot be read
stops the whole set-up with one line naming it, touching nothing); each file is then
written beside itself and renamed over the original, so a reader sees the old file or the
new one, never half of either.

The first set-up of a file keeps its original beside it (``NAME.slm-backup``) and records,
in slm's data directory (``setup.json``), where that backup is and a digest of what
set-up wrote. Undoing restores the original byte for byte when the file still holds exactly
what set-up wrote; when something else changed it since, only slm's entries are taken
out."""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slm.errors import ConfigError

BACKUP_SUFFIX = ".slm-backup"


@dataclass(frozen=True)
class Change:
    """A file's bytes before and after (None: the file does not exist)."""

    path: Path
    before: bytes | None
    after: bytes | None
    what: str = ""
    #: an undo that puts back the file as it was before set-up
    restores: bool = False

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        """The change as a unified diff, relative to nothing when the file is new."""
        old = _text(self.before).splitlines(keepends=True)
        new = _text(self.after).splitlines(keepends=True)
        name = str(self.path)
        lines = difflib.unified_diff(
            old,
            new,
            "/dev/null" if self.before is None else name,
            "/dev/null" if self.after is None else name,
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8")


def digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def real_path(path: Path) -> Path:
    """The file a path names, through symbolic links (a managed dotfile stays a link)."""
    return path.resolve() if path.is_symlink() else path


def read(path: Path) -> tuple[bytes | None, str]:
    """The file's bytes (None when it does not exist) and its text; a file that is not
    UTF-8 or cannot be read is refused."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        raise refuse(path, f"cannot be read ({exc.strerror})") from None
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse(path, "is not UTF-8 text") from None


def refuse(path: Path, why: str) -> ConfigError:
    return ConfigError(f"{path} {why}; nothing was changed")


def plan(path: Path, transform: Callable[[str], str], what: str = "") -> Change:
    """The change ``transform`` makes to the file's text; a text it cannot parse is
    refused, naming the file."""
    path = real_path(path)
    before, text = read(path)
    try:
        after = transform(text)
    except ValueError as exc:  # jsonedit.Unreadable and tomledit.Unreadable
        raise refuse(path, f"cannot be read as its host reads it: {exc}") from None
    data = after.encode("utf-8") if before is not None or after else None
    return Change(path, before, data, what)


class Ledger:
    """What set-up wrote, per file: its backup (None: there was no file) and the digest of
    the bytes written. Kept in slm's data directory, as ``setup.json``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            loaded = {}
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path} cannot be read ({exc}); move it away to continue") from None
        self.files: dict[str, dict[str, Any]] = loaded if isinstance(loaded, dict) else {}

    def entry(self, path: Path) -> dict[str, Any] | None:
        return self.files.get(str(path))

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.files, indent=2, sort_keys=True) + "\n"
        _replace(self.path, text.encode("utf-8"))


def apply(changes: list[Change], ledger: Ledger) -> list[Path]:
    """Write every change (first setup of a file: back the original up beside it); the
    backups made."""
    backups = []
    for change in changes:
        if not change.changed:
            continue
        entry = ledger.entry(change.path)
        if entry is None:
            entry = {"backup": None, "created": []}
            if change.before is not None:
                backup = _free_backup(change.path)
                shutil.copy2(change.path, backup)
                entry["backup"] = str(backup)
                backups.append(backup)
            entry["created"] = [str(p) for p in _missing_parents(change.path)]
        if change.after is None:
            change.path.unlink(missing_ok=True)
        else:
            change.path.parent.mkdir(parents=True, exist_ok=True)
            _replace(change.path, change.after)
        entry["written"] = digest(change.after)
        ledger.files[str(change.path)] = entry
    ledger.save()
    return backups


def plan_undo(path: Path, strip: Callable[[str], str], ledger: Ledger, what: str = "") -> Change:
    """How to take slm out of a file: its original back when it holds just what set-up
    wrote, else the file without slm's entries."""
    path = real_path(path)
    entry = ledger.entry(path)
    before, _ = read(path)
    if entry is not None and before is not None and digest(before) == entry.get("written"):
        backup = entry.get("backup")
        original = _read_or_none(backup)
        if not backup or original is not None:  # a backup deleted since: take slm out
            return Change(path, before, original, what, restores=True)
    return plan(path, strip, what)


def finish_undo(changes: list[Change], ledger: Ledger) -> list[str]:
    """Write the undo and forget the files: a backup restored is deleted, so are the
    directories set-up created and left empty; a backup that was not restored (the file
    changed since) stays, and is named in what is returned."""
    notes: list[str] = []
    for change in changes:
        if change.changed:
            if change.after is None:
                change.path.unlink(missing_ok=True)
            else:
                _replace(change.path, change.after)
        entry = ledger.files.pop(str(change.path), None)
        if entry is None:
            continue
        backup = entry.get("backup")
        restored = digest(change.after) == digest(_read_or_none(backup))
        if backup and restored:
            Path(backup).unlink(missing_ok=True)
        elif backup and Path(backup).exists():
            notes.append(f"{change.path} had changed since set-up: only slm's entries were "
                         f"taken out; the file as it was before set-up is in {backup}")  # fmt: skip
        if change.after is None:
            for directory in entry.get("created", []):
                with contextlib.suppress(OSError):
                    Path(directory).rmdir()  # only when empty
    ledger.save()
    return notes


def _read_or_none(path: str | None) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError:
        return None


def _free_backup(path: Path) -> Path:
    """``NAME.slm-backup``, or ``NAME.slm-backup.N`` when that is taken by someone else."""
    candidate = path.with_name(path.name + BACKUP_SUFFIX)
    number = 1
    while candidate.exists():
        candidate = path.with_name(f"{path.name}{BACKUP_SUFFIX}.{number}")
        number += 1
    return candidate


def _missing_parents(path: Path) -> list[Path]:
    """The directories above ``path`` that do not exist yet, deepest first."""
    missing = []
    parent = path.parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    return missing


def _replace(path: Path, data: bytes) -> None:
    """Write beside, flush, rename over: the file is the old one or the new one."""
    temporary = path.with_name(f".{path.name}.slm-{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            shutil.copymode(path, temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
