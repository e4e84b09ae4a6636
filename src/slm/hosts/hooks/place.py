"""Where the hooks keep their few files, under slm's data directory (``SLM_HOME``, else the
platform's user data directory), in ``hooks/``: the warm process's address (``worker.json``,
0600, with its secret), its lock, the spool of captures not yet done, each session's
capture offset, the journal the page reads, and the log. Standard library only: the thin
hook imports it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """slm's data directory, as :func:`slm.settings.data_dir` says (without importing it)."""
    env = os.environ if env is None else env
    if env.get("SLM_HOME"):
        return Path(env["SLM_HOME"]).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("slm", appauthor=False))


def hooks_dir(env: Mapping[str, str] | None = None) -> Path:
    """The hooks' directory, made private (0700) on first use."""
    folder = data_dir(env) / "hooks"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


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
