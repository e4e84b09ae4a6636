"""JSON Lines import and export: the bulk path in and a lossless copy out
(docs/transfer.md describes every key).

One JSON object per line with the fields of :class:`slm.MemoryInput` (``content``
required; ``id``, ``event_time``, ``recorded_at``, ``source``, ``confidence``,
``metadata``, ``tags``, the validity ``valid_from``, ``valid_to``, ``superseded_by`` and
``supersedes`` optional). Export writes these fields but ``supersedes``, so an exported
file imports back with the same times, metadata and validity (the probable updates between
memories are derived from their text again, the same way). Import validates the whole file
before storing anything, then stores it in batches, all or nothing: a batch that fails
takes away the memories the batches before it stored (:class:`slm.ingest.stage.AllOrNothing`).
Identical content is never stored twice, so re-running an import the process did not live
to finish completes it without duplicates. A conversation's system messages are skipped and
counted, or kept (``system="keep"``; :mod:`slm.inputs.conversations`).

Ids are unique in a store. A line's ``id`` is kept when it is free; when another memory
holds it (importing into another profile of the same store, say) the memory gets a new id,
and every reference to it in the file (``superseded_by``, feedback's ``memory_id``) is
rewritten the same way, so links never point into another profile. A ``superseded_by`` that
names no memory of the file or of the profile is refused before anything is stored.

The profile's feedback follows its memories, one line each: ``{"feedback": {"memory_id",
"useful", "query_id", "at", "request"}}`` (``request``: what the recall named by
``query_id`` asked, so the imported profile can learn from it again). Import records
each event once, after the memories, skipping those already there; the report counts
those it skipped.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any

from slm import validate
from slm.engine import Memory
from slm.errors import InvalidInput, NotFound
from slm.ingest.stage import AllOrNothing
from slm.inputs import scope as owners
from slm.inputs.conversations import is_conversation
from slm.inputs.conversations import read as read_conversation
from slm.inputs.memories import EXPORTED_FIELDS
from slm.models import LOGGED_OPTIONS, content_hash, scope_of, to_micros
from slm.store.base import FeedbackEvent, LoggedRecall
from slm.store.feedback import MAX_FEEDBACK

IMPORT_BATCH = 256
#: No owner: each memory's metadata as the file gives it.
_NOBODY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ImportReport:
    read: int
    stored: int
    existing: int
    #: memories stored under a new id because another memory of the store held theirs
    renamed: int = 0
    #: feedback events recorded (those already there are not counted)
    feedback: int = 0
    #: feedback events not recorded: already there, or older than the profile's own label
    feedback_skipped: int = 0
    #: system messages of conversations left out (``system="skip"``)
    system_skipped: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(slots=True)
class _Reading:
    """How a file's conversations are read, and what reading them left out."""

    system: str = "skip"
    system_skipped: int = 0
    #: whose memories they all are (``slm import --user``): merged into each one's metadata
    owner: Mapping[str, Any] = field(default_factory=dict)


def _lines(handle: IO[str], reading: _Reading) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each item, with where it is in the file for messages (``line 3``): a conversation line
    (``{"messages": [...]}`` or a list of messages) expanded into its memories. A file whose
    first line is not a JSON value by itself is one JSON document (:func:`_document`)."""
    first = True
    for number, line in enumerate(bounded_lines(handle), start=1):
        if not line.strip():
            continue
        _shallow(line, f"line {number}")
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            # A value cut short by the end of the line goes on below it: a document. Valid
            # JSON never fails earlier than that, so an error within the line is the line's.
            if first and exc.pos >= len(line.rstrip()) and handle.seekable():
                yield from _document(handle, reading)
                return
            raise InvalidInput(
                f"line {number}: not valid JSON ({exc.msg} at column {exc.colno})"
            ) from None
        first = False
        messages = isinstance(item, list) and item and all(isinstance(m, dict) for m in item)
        if is_conversation(item) or messages:
            yield from _conversation(f"line {number}", item, reading)
            continue
        if not isinstance(item, dict):
            raise InvalidInput(f"line {number}: expected a JSON object")
        if reading.owner and "feedback" not in item:
            try:
                item["metadata"] = owners.into_metadata(item.get("metadata"), reading.owner)
            except InvalidInput as exc:
                raise InvalidInput(f"line {number}: {exc}", field=exc.field) from None
        yield f"line {number}", item


def bounded_lines(handle: IO[str]) -> Iterator[str]:
    """The lines of ``handle``, each refused when longer than ``MAX_JSON_CHARS`` (read at
    most that far: a file without line breaks, such as /dev/zero, is never read whole)."""
    number = 0
    while line := handle.readline(validate.MAX_JSON_CHARS + 1):
        number += 1
        if len(line) > validate.MAX_JSON_CHARS:
            raise InvalidInput(
                f"line {number}: longer than {validate.MAX_JSON_CHARS} characters, "
                "the most one line may hold"
            )
        yield line


def _shallow(text: str, where: str) -> None:
    """Refuse JSON nested deeper than ``MAX_JSON_DEPTH`` before it is parsed (the parser
    recurses once per level)."""
    if validate.json_depth(text) > validate.MAX_JSON_DEPTH:
        raise InvalidInput(
            f"{where}: arrays and objects nested more than {validate.MAX_JSON_DEPTH} deep, "
            "the most a file's JSON may nest"
        )


def _document(handle: IO[str], reading: _Reading) -> Iterator[tuple[str, dict[str, Any]]]:
    """The memories of a file that is one JSON document: a conversation, or a list of them,
    as a chat export writes it. Its problems are placed as in a document: the line and
    column of bad JSON, the conversation of a bad message."""
    handle.seek(0)
    text = handle.read(validate.MAX_JSON_CHARS + 1)
    if len(text) > validate.MAX_JSON_CHARS:
        raise InvalidInput(
            f"the file is one JSON document of more than {validate.MAX_JSON_CHARS} characters, "
            "the most read as one; write it as JSON Lines, one memory or conversation a line"
        )
    _shallow(text, "the document")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg} (read as one "
            "JSON document, not JSON Lines: its first line is not a JSON value by itself)"
        ) from None
    if is_conversation(document):
        found = [("the conversation", document)]
    elif isinstance(document, list) and document and all(map(is_conversation, document)):
        found = [(f"conversation {i}", each) for i, each in enumerate(document, start=1)]
    else:
        raise InvalidInput(
            "the file is one JSON document, not JSON Lines: a document is read as a "
            "conversation or a list of conversations only; write one memory object per line"
        )
    for where, conversation in found:
        yield from _conversation(where, conversation, reading)


def _conversation(
    where: str, conversation: object, reading: _Reading
) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        transcript = read_conversation(
            conversation, system=reading.system, metadata=reading.owner or None
        )
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}", field=exc.field, index=exc.index) from None
    reading.system_skipped += transcript.system_skipped
    for item in transcript.items:
        fields = {"content": item.content, "event_time": item.event_time,
                  "source": item.source, "metadata": item.metadata}  # fmt: skip
        yield where, {key: value for key, value in fields.items() if value is not None}


def _open(path: str | Path) -> IO[str]:
    try:
        return open(path, encoding="utf-8", errors="strict")
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None


def check_jsonl(
    memory: Memory, path: str | Path, system: str = "skip", owner: Mapping[str, Any] = _NOBODY
) -> int:
    """Validate every line without storing anything; return the number of items."""
    count = 0
    with _open(path) as handle:
        try:
            for where, item in _lines(handle, _Reading(system, owner=owner)):
                try:
                    if "feedback" in item:
                        _feedback_event(item)
                        continue
                    memory.validate_item(item)
                except InvalidInput as exc:
                    raise InvalidInput(f"{where}: {exc}", field=exc.field) from None
                count += 1
        except UnicodeDecodeError:
            raise InvalidInput(f"{path} is not UTF-8 text") from None
    return count


def import_jsonl(
    memory: Memory,
    path: str | Path,
    progress: Callable[[int], None] | None = None,
    system: str = "skip",
    owner: Mapping[str, Any] = _NOBODY,
) -> ImportReport:
    """Store every line of ``path``, a conversation's ``system`` messages skipped or kept,
    each memory ``owner``'s (``{"user_id": "alice"}``: merged into its metadata); see the
    module docstring for guarantees."""
    check_jsonl(memory, path, system, owner)
    ids, renamed = _plan_ids(memory, path, owner)
    reading = _Reading(system, owner=owner)
    read = stored = 0
    feedback: list[dict[str, Any]] = []
    with _open(path) as handle, AllOrNothing(memory.store, memory.profile) as whole:
        batch: list[dict[str, Any]] = []
        for _, item in _lines(handle, reading):
            if "feedback" in item:
                feedback.append(item)
                continue
            batch.append(_renamed(item, ids))
            if len(batch) == IMPORT_BATCH:
                stored += _store(whole, memory, batch, progress)
                read += len(batch)
                batch = []
        if batch:
            stored += _store(whole, memory, batch, progress)
            read += len(batch)
    recorded = _store_feedback(memory, feedback, ids)
    return ImportReport(
        read=read,
        stored=stored,
        existing=read - stored,
        feedback=recorded,
        renamed=renamed,
        feedback_skipped=len(feedback) - recorded,
        system_skipped=reading.system_skipped,
    )


def _plan_ids(
    memory: Memory, path: str | Path, owner: Mapping[str, Any]
) -> tuple[dict[str, str], int]:
    """The id each line's ``id`` will have in this store: itself when free; the stored
    memory's when the profile (or an earlier line) already holds the same content; a new
    one when another memory holds it. Refuses a ``superseded_by`` that names no memory of
    the file or the profile, before anything is stored. Also returns how many memories
    to store get a new id."""
    wanted: dict[str, str] = {}  # line id -> content hash
    keys = memory.scope_keys()
    links: list[tuple[str, str]] = []
    with _open(path) as handle:
        for where, item in _lines(handle, _Reading(owner=owner)):
            if "feedback" in item:
                continue
            if item.get("id") is not None:
                text = validate.content(item["content"])
                scope = scope_of(validate.metadata(item.get("metadata")), keys)
                wanted.setdefault(str(item["id"]), content_hash(text, scope))
            if item.get("superseded_by") is not None:
                links.append((where, str(item["superseded_by"])))
    held = memory.store.existing(memory.profile, list(set(wanted.values())))
    taken = _taken(memory, list(wanted))
    plan: dict[str, str] = {}
    by_hash: dict[str, str] = {}
    renamed = 0
    for old, digest in wanted.items():
        new = held.get(digest) or by_hash.get(digest)
        if new is None:
            new = old if old not in taken else _fresh(taken)
            renamed += new != old
            taken.add(new)
        plan[old] = by_hash[digest] = new
    outside = [(n, target) for n, target in links if target not in plan]
    known = {r.id for r in memory.store.get(memory.profile, [t for _, t in outside])}
    for where, target in outside:
        if target not in known:
            raise InvalidInput(
                f"{where}: superseded_by {target} names no memory of this file or of "
                f"profile {memory.profile!r} (nothing was imported)",
                field="superseded_by",
            )
    return plan, renamed


def _taken(memory: Memory, ids: list[str]) -> set[str]:
    """Which of ``ids`` a memory of any profile of the store already holds."""
    store, found = memory.store, set()
    for profile in {*store.profiles(), memory.profile}:
        for start in range(0, len(ids), validate.MAX_IDS_PER_CALL):
            found |= {
                r.id for r in store.get(profile, ids[start : start + validate.MAX_IDS_PER_CALL])
            }
    return found


def _fresh(taken: set[str]) -> str:
    while (new := secrets.token_hex(8)) in taken:
        pass
    return new


def _store(
    whole: AllOrNothing,
    memory: Memory,
    batch: list[dict[str, Any]],
    progress: Callable[[int], None] | None,
) -> int:
    """Store one batch as part of the ``whole`` import; how many of its memories were new."""
    done = whole.add(memory.store_many(batch))
    if progress:
        progress(len(batch))
    return sum(d.created for d in done)


def _renamed(item: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """``item`` with its own id and the one it is superseded by as planned."""
    out = dict(item)
    for key in ("id", "superseded_by"):
        if out.get(key) is not None:
            out[key] = ids.get(str(out[key]), out[key])
    return out


def export_jsonl(memory: Memory, handle: IO[str], page: int = 1000) -> int:
    """Write every memory of the profile, oldest key first, then its feedback; return how
    many memories."""
    written, after = 0, 0
    while True:
        records = memory.store.scan(memory.profile, after, page)
        if not records:
            _export_feedback(memory, handle)
            return written
        for record in records:
            row = {k: v for k, v in record.to_dict().items() if k in EXPORTED_FIELDS}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        written += len(records)
        after = records[-1].key


def _export_feedback(memory: Memory, handle: IO[str]) -> int:
    """Write the profile's feedback events, oldest first, each with its recall's request."""
    memory.learning.flush()
    events = memory.store.feedback.events(memory.profile, MAX_FEEDBACK)[::-1]
    named = [e.query_id for e in events if e.query_id is not None]
    logged = memory.store.feedback.logged(memory.profile, named)
    for event in events:
        entry = logged.get(event.query_id or "")
        line = {
            **event.to_dict(),
            "request": json.loads(entry.request) if entry is not None else None,
        }
        handle.write(json.dumps({"feedback": line}, ensure_ascii=False) + "\n")
    return len(events)


def _feedback_event(item: dict[str, Any]) -> tuple[FeedbackEvent, dict[str, Any] | None]:
    """The event of a feedback line, and its recall's request; InvalidInput if malformed."""
    body = item["feedback"]
    if set(item) != {"feedback"} or not isinstance(body, dict):
        raise InvalidInput('a feedback line is {"feedback": {...}} and nothing else')
    unknown = sorted(set(body) - {"memory_id", "useful", "query_id", "at", "request"})
    if unknown:
        raise InvalidInput(f"unknown feedback field(s) {', '.join(unknown)}", field=unknown[0])
    request = body.get("request")
    if request is not None and not (
        isinstance(request, dict) and "query" in request and set(request) <= _REQUEST_FIELDS
    ):
        raise InvalidInput(
            f"feedback request must be a recall request with the fields "
            f"{', '.join(sorted(_REQUEST_FIELDS))}",
            field="request",
        )
    at = validate.timestamp(body.get("at"), "at")
    if at is None:
        raise InvalidInput("feedback needs its time, 'at'", field="at")
    event = FeedbackEvent(
        validate.memory_id(body.get("memory_id"), "memory_id"),
        validate.flag(body.get("useful"), "useful"),
        validate.query_id(body.get("query_id")),
        to_micros(at),
    )
    return event, request


#: What a logged recall request may hold (``Learning.logged``).
_REQUEST_FIELDS = frozenset(LOGGED_OPTIONS)


def _store_feedback(memory: Memory, items: list[dict[str, Any]], ids: dict[str, str]) -> int:
    """Record the feedback lines not already in the profile (same memory, label, recall and
    time), nor older than the profile's own label on the same recall and memory; events on
    memories the profile lacks are skipped. Returns how many recorded."""
    events = memory.store.feedback.events(memory.profile, MAX_FEEDBACK)
    have = {(e.memory_id, e.useful, e.query_id, e.created_at) for e in events}
    latest: dict[tuple[str, str], int] = {}
    for e in events:
        if e.query_id is not None:
            key = (e.query_id, e.memory_id)
            latest[key] = max(latest.get(key, e.created_at), e.created_at)
    recorded = 0
    for item in items:
        event, request = _feedback_event(item)
        event = replace(event, memory_id=ids.get(event.memory_id, event.memory_id))
        if (event.memory_id, event.useful, event.query_id, event.created_at) in have:
            continue
        pair = (event.query_id or "", event.memory_id)
        if event.query_id is not None and latest.get(pair, -1) >= event.created_at:
            continue
        if event.query_id is not None:
            latest[pair] = event.created_at
        try:
            record = memory.get(event.memory_id)
        except NotFound:
            continue
        query_id = event.query_id
        if query_id is not None and not memory.store.feedback.logged(memory.profile, [query_id]):
            if request is None:
                continue
            entry = LoggedRecall(query_id, event.created_at, json.dumps(request), "[]")
            memory.store.feedback.log(memory.profile, [entry])
        memory.store.feedback.add(memory.profile, record.source or "", event.useful, event)
        recorded += 1
    return recorded
