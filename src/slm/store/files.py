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
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from slm.errors import InvalidInput

FILE_MODE = 0o600
DIRECTORY_MODE = 0o700


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


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
