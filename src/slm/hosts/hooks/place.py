"""Where the hooks keep their few files, under slm's data directory (``SLM_HOME``, else the
platform's user data directory), in ``hooks/``: the warm process's address (``worker.json``,
0600, with its secret), its lock, the spool of captures not yet done, each session's
capture offset, the journal the page reads, and the log. The thin hook imports it, so it
imports nothing but ``os`` at its top (``pathlib`` and ``platformdirs`` cost a prompt's hook
milliseconds): :func:`hooks_folder` is the thin hook's, :func:`hooks_dir` the same as a
``Path`` for the warm process."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path


def data_folder(env: Mapping[str, str] | None = None) -> str:
    """slm's data directory, as :func:`slm.settings.data_dir` says (without importing it):
    ``SLM_HOME``, else the platform's user data directory (on Linux computed here as
    ``platformdirs`` does, ``$XDG_DATA_HOME/slm`` else ``~/.local/share/slm``)."""
    env = os.environ if env is None else env
    if env.get("SLM_HOME"):
        return os.path.expanduser(env["SLM_HOME"])
    if sys.platform == "linux":
        base = env.get("XDG_DATA_HOME", "").strip() or os.path.expanduser("~/.local/share")
        return os.path.join(base, "slm")
    from platformdirs import user_data_dir

    return str(user_data_dir("slm", appauthor=False))


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """:func:`data_folder` as a ``Path``."""
    from pathlib import Path

    return Path(data_folder(env))


def hooks_folder(env: Mapping[str, str] | None = None) -> str:
    """The hooks' directory, made private (0700) on first use."""
    folder = os.path.join(data_folder(env), "hooks")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def hooks_dir(env: Mapping[str, str] | None = None) -> Path:
    """:func:`hooks_folder` as a ``Path``."""
    from pathlib import Path

    return Path(hooks_folder(env))


def store_key(db: str | None, profile: str) -> str:
    """A short name for one store and profile: the journal's and the offsets' file names."""
    import hashlib  # not at the top: the thin hook never needs it

    where = os.path.realpath(db) if db and "://" not in db else (db or "")
    return hashlib.sha256(f"{where}\0{profile}".encode()).hexdigest()[:16]


def session_key(db: str | None, profile: str, session: str) -> str:
    import hashlib

    return hashlib.sha256(f"{store_key(db, profile)}\0{session}".encode()).hexdigest()[:24]


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only, replacing it whole (a reader
    sees the old file or the new one, never half)."""
    part = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(part, path)
