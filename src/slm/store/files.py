"""Files slm creates are readable by their owner only.

Memories are personal: on a machine with other users, the store, its write-ahead log and
shared memory, its index files, exports, backups and calibration artefacts are created with
mode 0600, and the directories slm creates for them with 0700, whatever the umask. Files
and directories that already exist keep the mode their owner gave them.

Writes that replace a file go through a new temporary file made here (random name,
exclusive create), never through a name that may already exist, so a symlink planted at
``FILE.partial`` cannot redirect them; a target that is itself a symlink is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from slm.errors import InvalidInput

FILE_MODE = 0o600
DIRECTORY_MODE = 0o700
#: The largest manifest of a saved pair read (a graph's tombstones are listed in it).
MAX_MANIFEST_BYTES = 64 * 1024 * 1024


def private_directory(path: Path) -> None:
    """Create ``path`` (and missing parents) if it does not exist; the directories created
    here are the owner's alone."""
    missing: list[Path] = []
    folder = path
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            folder.mkdir(mode=DIRECTORY_MODE)


def private_file(path: Path) -> None:
    """Create the empty file ``path`` with mode 0600 unless it exists (SQLite then gives its
    write-ahead log and shared memory the same mode)."""
    try:
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, FILE_MODE)
    except FileExistsError:
        return
    os.close(handle)


def refuse_symlink(target: Path) -> None:
    if target.is_symlink():
        raise InvalidInput(f"{target} is a symbolic link; give the real file's path", field="path")


@contextlib.contextmanager
def replacing(target: Path) -> Iterator[Path]:
    """A new private temporary file beside ``target``, to fill and then rename onto it
    (``os.replace``); removed if the work fails. Refuses a ``target`` that is a symlink."""
    refuse_symlink(target)
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial",
                                    dir=target.parent)  # fmt: skip
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
    finally:
        temporary.unlink(missing_ok=True)


def write_private(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` whole (a new private file renamed onto it)."""
    with replacing(target) as temporary:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, target)


def save_pair(
    folder: Path, name: str, ext: str, write: Callable[[Path], None], manifest: dict[str, Any]
) -> None:
    """Save an index kept beside a store as a pair under ``folder``: a new data file
    ``{name}.{random}.{ext}`` that ``write`` fills (synced), then the ``{name}.json``
    manifest that names it, replaced atomically and synced with its folder, so a crash or
    a power cut leaves the previous consistent pair. Then the data file the previous
    manifest named goes, and leftovers older than an hour (another process saving at the
    same moment keeps its own file)."""
    private_directory(folder)
    manifest_path = folder / f"{name}.json"
    previous = read_manifest(manifest_path)
    data = f"{name}.{secrets.token_hex(6)}.{ext}"
    private_file(folder / data)  # the writer writes into it, keeping its mode
    write(folder / data)
    _fsync(folder / data)
    whole = {
        "file": data,
        "bytes": (folder / data).stat().st_size,
        "sha256": _digest(folder / data, name),
    }
    _write_atomically(manifest_path, json.dumps({**manifest, **whole}))
    stale = time.time() - 3600
    for old in data_files(folder, name, ext):
        if old.name != data and (
            (previous is not None and old.name == previous.get("file"))
            or old.stat().st_mtime < stale
        ):
            old.unlink(missing_ok=True)


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest of a saved pair (:func:`save_pair`), or None when there is none whole
    (none at all, larger than :data:`MAX_MANIFEST_BYTES`, or not a JSON object)."""
    try:
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            return None
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return manifest if isinstance(manifest, dict) else None


class Untrusted(Exception):
    """A saved file that fails its check before use (the caller rebuilds it from the rows);
    the message says what failed."""


def data_file(folder: Path, name: str, ext: str, manifest: dict[str, Any]) -> Path:
    """The data file ``manifest`` names, once checked to be the one :func:`save_pair`
    wrote for ``name``: a name as it makes them (no folder, no other name's file), a
    regular file in ``folder`` (not a link), of the size and SHA-256 recorded (its name
    hashed in, so another name's file renamed fails too). Raises :class:`Untrusted`."""
    file = manifest.get("file")
    pattern = re.escape(name) + r"\.[0-9a-f]{12}\." + re.escape(ext)
    if not isinstance(file, str) or not re.fullmatch(pattern, file):
        raise Untrusted(f"its manifest names {str(file)[:80]!r}, not a data file of {name}")
    path = folder / file
    try:
        info = path.lstat()
    except OSError as exc:
        raise Untrusted(f"its data file cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise Untrusted("its data file is not a regular file")
    if info.st_size != manifest.get("bytes"):
        raise Untrusted(f"its data file has {info.st_size} bytes, not {manifest.get('bytes')}")
    try:
        digest = _digest(path, name)
    except OSError as exc:
        raise Untrusted(f"its data file cannot be read: {exc.strerror}") from None
    if not isinstance(manifest.get("sha256"), str) or not hmac.compare_digest(
        digest, manifest["sha256"]
    ):
        raise Untrusted("its data file is not the one saved (its SHA-256 differs)")
    return path


def _digest(path: Path, name: str) -> str:
    """SHA-256 of ``name`` and the file at ``path`` (read a block at a time)."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\0")
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def data_files(folder: Path, name: str, ext: str) -> list[Path]:
    """The data files saved under ``name`` (and not those of a name it prefixes: profile
    ``a`` must not see ``a.b``'s files)."""
    pattern = re.compile(re.escape(name) + r"\.[0-9a-f]{12}\." + re.escape(ext))
    if not folder.is_dir():
        return []
    return [path for path in folder.iterdir() if pattern.fullmatch(path.name)]


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        handle_no = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with open(handle_no, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync(path.parent)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
