"""The hooks' journal: one JSON line per hook event the warm process handled for a store
and profile (what was injected for a prompt, or why nothing was; what a capture stored),
read back by the page (``/hooks``). It lives beside the other hook files
(:mod:`slm.hosts.hooks.place`), is private to the user, and keeps its newest
:data:`KEEP_BYTES` or so (the oldest half is dropped when it grows past twice that)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slm.hosts.hooks.place import hooks_dir, store_key

#: About how much of the journal is kept.
KEEP_BYTES = 2 * 1024 * 1024
_LOCK = threading.Lock()


def path(location: str, profile: str, env: Mapping[str, str] | None = None) -> Path:
    """The journal of the store at ``location`` (:attr:`slm.Memory.location`) and
    ``profile``."""
    return hooks_dir(env) / f"journal-{store_key(location, profile)}.jsonl"


def append(where: Path, entry: Mapping[str, Any]) -> None:
    line = json.dumps(entry, ensure_ascii=False, default=str) + "\n"
    with _LOCK:
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as out:
            out.write(line)
        if where.stat().st_size > 2 * KEEP_BYTES:
            _shorten(where)


def _shorten(where: Path) -> None:
    data = where.read_bytes()[-KEEP_BYTES:]
    start = data.find(b"\n") + 1
    part = where.with_name(where.name + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data[start:])
    os.replace(part, where)


def entries(where: Path, limit: int = 500) -> list[dict[str, Any]]:
    """The newest ``limit`` entries, newest first (lines that do not parse are skipped)."""
    if not where.exists():
        return []
    out: list[dict[str, Any]] = []
    for line in reversed(where.read_text(encoding="utf-8", errors="replace").splitlines()):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
            if len(out) == limit:
                break
    return out
