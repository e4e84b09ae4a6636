"""JSON Lines import and export: the bulk path in and a lossless copy out.

One JSON object per line with the fields of :class:`slm.MemoryInput` (``content``
required; ``id``, ``event_time``, ``recorded_at``, ``source``, ``confidence``,
``metadata``, ``tags``, the validity ``valid_from``, ``valid_to``, ``superseded_by`` and
``supersedes`` optional). Export writes these fields but ``supersedes``, so an exported
file imports back with the same ids, times, metadata and validity (the probable updates
between memories are derived from their text again, the same way). Import validates the whole file
before storing anything, then stores it in batches; identical content is never stored
twice, so re-running an interrupted import completes it without duplicates.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from slm.engine import Memory
from slm.errors import InvalidInput

IMPORT_BATCH = 256
_FIELDS = (
    "id",
    "content",
    "event_time",
    "recorded_at",
    "source",
    "confidence",
    "metadata",
    "tags",
    "valid_from",
    "valid_to",
    "superseded_by",
)


@dataclass(frozen=True, slots=True)
class ImportReport:
    read: int
    stored: int
    existing: int


def _lines(handle: IO[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise InvalidInput(f"line {number}: expected a JSON object")
        yield number, item


def _open(path: str | Path) -> IO[str]:
    try:
        return open(path, encoding="utf-8", errors="strict")
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None


def check_jsonl(memory: Memory, path: str | Path) -> int:
    """Validate every line without storing anything; return the number of items."""
    count = 0
    with _open(path) as handle:
        try:
            for number, item in _lines(handle):
                try:
                    memory.validate_item(item)
                except InvalidInput as exc:
                    raise InvalidInput(f"line {number}: {exc}", field=exc.field) from None
                count += 1
        except UnicodeDecodeError:
            raise InvalidInput(f"{path} is not UTF-8 text") from None
    return count


def import_jsonl(
    memory: Memory, path: str | Path, progress: Callable[[int], None] | None = None
) -> ImportReport:
    """Store every line of ``path``; see the module docstring for guarantees."""
    check_jsonl(memory, path)
    read = stored = 0
    with _open(path) as handle:
        batch: list[dict[str, Any]] = []
        for _, item in _lines(handle):
            batch.append(item)
            if len(batch) == IMPORT_BATCH:
                stored += _store(memory, batch)
                read += len(batch)
                if progress:
                    progress(len(batch))
                batch = []
        if batch:
            stored += _store(memory, batch)
            read += len(batch)
            if progress:
                progress(len(batch))
    return ImportReport(read=read, stored=stored, existing=read - stored)


def _store(memory: Memory, batch: list[dict[str, Any]]) -> int:
    before = memory.count()
    memory.remember_many(batch)
    return memory.count() - before


def export_jsonl(memory: Memory, handle: IO[str], page: int = 1000) -> int:
    """Write every memory of the profile, oldest key first; return how many."""
    written, after = 0, 0
    while True:
        records = memory.store.scan(memory.profile, after, page)
        if not records:
            return written
        for record in records:
            row = record.to_dict()
            handle.write(json.dumps({f: row[f] for f in _FIELDS}, ensure_ascii=False) + "\n")
        written += len(records)
        after = records[-1].key
