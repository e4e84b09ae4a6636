"""Checks applied at the library boundary; the adapters inherit them.

Every check raises :class:`~slm.errors.InvalidInput` with a message that names the
argument and the rule, and with ``field`` set to the argument's name. The limits are part
of the public contract (docs/limits.md).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from itertools import islice
from typing import Any

import numpy as np

from slm.errors import InvalidInput

MAX_CONTENT_BYTES = 512 * 1024
MAX_QUERY_BYTES = 4 * 1024
MAX_METADATA_BYTES = 16 * 1024
#: Objects and arrays nested inside each other, the metadata object itself included.
MAX_METADATA_DEPTH = 32
#: The longest line of a JSON Lines file, and the largest file read as one JSON document
#: (a chat export), in characters: what is read into memory at once.
MAX_JSON_CHARS = 64 * 1024 * 1024
#: Arrays and objects nested inside each other in one JSON value read from a file (a memory
#: line's metadata holds at most MAX_METADATA_DEPTH of them; a conversation needs 4).
MAX_JSON_DEPTH = MAX_METADATA_DEPTH + 8
MAX_SOURCE_CHARS = 256
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_K = 1000
MAX_BATCH = 10_000
MAX_LIST_LIMIT = 10_000
#: The largest signed 64-bit integer, the most SQLite and PostgreSQL accept as an OFFSET.
MAX_OFFSET = 2**63 - 1
MAX_IDS_PER_CALL = 10_000
PROFILE_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_ID_PATTERN = re.compile(r"[0-9a-f]{16}")
_MIN_YEAR, _MAX_YEAR = 1, 9999


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in the JSON ``text`` (0 for a plain value), counted
    without parsing it (so without recursion): brackets inside strings are not counted.
    Unbalanced text counts as deep as its brackets go; parsing it then says what is wrong."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    if not brackets:
        return 0
    codes = np.frombuffer(brackets.encode("ascii"), dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def _show(value: object) -> str:
    """A short, always printable rendering of a rejected value for a message."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to print (sys.get_int_max_str_digits)
        return "a number too large to print"
    return text if len(text) <= 80 else text[:77] + "..."


def encodable(text: str, what: str, field: str | None = None) -> str:
    """``text``, if it can be written as UTF-8. A lone surrogate (a JSON escape such as
    ``"\\ud800"``, or a byte the platform could not decode in a command's argument) cannot:
    no store holds it and no answer could carry it, so it is refused where it comes in."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            f"{what} is not valid Unicode (lone surrogate)", field=field or what
        ) from None
    return text


def _clean_text(value: object, what: str, max_bytes: int, field: str | None = None) -> str:
    """Trimmed, NFC-normalised text of at most ``max_bytes`` UTF-8 bytes, both as given
    and as returned (NFC can make a text longer)."""
    field = field or what
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, not {type(value).__name__}", field=field)
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character", field=field)
    size = len(encodable(value, what, field).encode("utf-8"))
    text = ""
    if size <= max_bytes:
        text = unicodedata.normalize("NFC", value).strip()
        size = len(text.encode("utf-8"))
    if size > max_bytes:
        hint = (
            " (512 KiB); store a longer text as several memories, a chapter or section each"
            if field == "content"
            else ""
        )
        raise InvalidInput(
            f"{what} is {size} bytes; the limit is {max_bytes} bytes{hint}", field=field
        )
    if not text:
        raise InvalidInput(f"{what} is empty", field=field)
    return text


def content(value: object) -> str:
    """Memory text: non-empty after stripping, valid Unicode, no NUL, at most 512 KiB UTF-8."""
    return _clean_text(value, "content", MAX_CONTENT_BYTES)


def query(value: object) -> str:
    """Recall query: non-empty, valid Unicode, no NUL, at most 4 KiB UTF-8."""
    return _clean_text(value, "query", MAX_QUERY_BYTES)


def profile(value: object) -> str:
    if not isinstance(value, str) or not PROFILE_PATTERN.fullmatch(value):
        raise InvalidInput(
            f"profile must match [A-Za-z0-9_.-]{{1,64}}, got {_show(value)}", field="profile"
        )
    return value


def memory_id(value: object, field: str = "id") -> str:
    if not isinstance(value, str) or not _ID_PATTERN.fullmatch(value):
        raise InvalidInput(
            f"memory id must be 16 lowercase hex characters, got {_show(value)}", field=field
        )
    return value


_QUERY_ID_PATTERN = re.compile(r"[0-9a-f]{32}")


def query_id(value: object) -> str | None:
    """A recall's ``query_id`` (32 lowercase hex characters), or None."""
    if value is None:
        return None
    if not isinstance(value, str) or not _QUERY_ID_PATTERN.fullmatch(value):
        raise InvalidInput(
            f"query id must be 32 lowercase hex characters, got {_show(value)}", field="query_id"
        )
    return value


def flag(value: object, field: str) -> bool:
    """A boolean argument: true or false, nothing else."""
    if not isinstance(value, bool):
        raise InvalidInput(f"{field} must be true or false, got {_show(value)}", field=field)
    return value


def _id_or_ids(values: object, field: str, most: int) -> Iterator[object]:
    """The ids ``values`` gives, one id or an iterable of them, read up to one more than
    ``most`` (so that the caller can refuse a longer list)."""
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, Iterable) or isinstance(values, bytes | Mapping):
        raise InvalidInput(f"{field} must be a memory id or a list of them", field=field)
    return islice(values, most + 1)


def memory_ids(values: object) -> list[str]:
    """One id or an iterable of ids, deduplicated in order; at most ``MAX_IDS_PER_CALL``."""
    ids = [memory_id(v, "ids") for v in _id_or_ids(values, "ids", MAX_IDS_PER_CALL)]
    if len(ids) > MAX_IDS_PER_CALL:
        raise InvalidInput(
            f"more than {MAX_IDS_PER_CALL} ids in one call; the limit is {MAX_IDS_PER_CALL}",
            field="ids",
        )
    return list(dict.fromkeys(ids))


#: How many memories one new memory may supersede.
MAX_SUPERSEDES = 100


def supersedes(values: object) -> tuple[str, ...]:
    """The ids a new memory supersedes: one id or a list, deduplicated in order."""
    if values is None:
        return ()
    given = _id_or_ids(values, "supersedes", MAX_SUPERSEDES)
    try:
        ids = [memory_id(v, "supersedes") for v in given]
    except InvalidInput as exc:
        raise InvalidInput(f"supersedes: {exc}", field="supersedes") from None
    if len(ids) > MAX_SUPERSEDES:
        raise InvalidInput(
            f"a memory can supersede at most {MAX_SUPERSEDES} others", field="supersedes"
        )
    return tuple(dict.fromkeys(ids))


def _integer(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be an integer, not {type(value).__name__}", field=name)
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be in {low}..{high}, got {_show(value)}", field=name)
    return value


def k(value: object) -> int:
    return _integer(value, "k", 1, MAX_K)


def limit_offset(limit: object, offset: object) -> tuple[int, int]:
    """``limit`` in 1..MAX_LIST_LIMIT and ``offset`` in 0..MAX_OFFSET."""
    return _integer(limit, "limit", 1, MAX_LIST_LIMIT), _integer(offset, "offset", 0, MAX_OFFSET)


def fraction(value: object, name: str) -> float:
    """A finite number in 0..1 (``confidence``, ``min_relevance``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(
            f"{name} must be a number in 0..1, not {type(value).__name__}", field=name
        )
    number = float(value) if isinstance(value, float) or abs(value) <= 1 else math.inf
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InvalidInput(f"{name} must be in 0..1, got {_show(value)}", field=name)
    return number


def confidence(value: object) -> float:
    return fraction(value, "confidence")


def contains(value: object) -> str | None:
    """Text a listing's memories must contain (None or empty: any); at most 4 KiB."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _clean_text(value, "text", MAX_QUERY_BYTES)


def source(value: object) -> str | None:
    if value is None:
        return None
    text = _clean_text(value, "source", MAX_SOURCE_CHARS * 4)
    if len(text) > MAX_SOURCE_CHARS:
        raise InvalidInput(
            f"source is {len(text)} characters; the limit is {MAX_SOURCE_CHARS}", field="source"
        )
    return text


def tags(values: object) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise InvalidInput("tags must be a list of strings", field="tags")
    unique: dict[str, None] = {}
    for value in values:
        tag = _clean_text(value, "tag", MAX_TAG_CHARS * 4, field="tags")
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidInput(
                f"tag {tag[:20]!r}... is longer than {MAX_TAG_CHARS} characters", field="tags"
            )
        unique[tag] = None
        if len(unique) > MAX_TAGS:
            raise InvalidInput(f"more than {MAX_TAGS} tags; the limit is {MAX_TAGS}", field="tags")
    return tuple(unique)


def _check_structure(value: object) -> None:
    """Reject metadata nested deeper than ``MAX_METADATA_DEPTH``, or holding a key or text
    that is not valid Unicode, without recursion. More values than ``MAX_METADATA_BYTES``
    cannot serialise within the size limit, so the walk stops there too (which also ends it
    on a structure that contains itself)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > MAX_METADATA_BYTES:
            raise InvalidInput(
                f"metadata is larger than {MAX_METADATA_BYTES} bytes once serialised",
                field="metadata",
            )
        if isinstance(item, str):
            encodable(item, f"metadata text {_show(item)}", "metadata")
            continue
        if isinstance(item, Mapping):
            for name in item:
                if isinstance(name, str):
                    encodable(name, f"metadata key {_show(name)}", "metadata")
            children: Iterable[object] = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > MAX_METADATA_DEPTH:
            raise InvalidInput(
                f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels", field="metadata"
            )
        stack.extend((child, depth + 1) for child in children)


def metadata(value: object) -> dict[str, Any]:
    """A JSON object (dict with string keys), at most 16 KiB once serialised and nested at
    most ``MAX_METADATA_DEPTH`` levels deep; a string is parsed as JSON first."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                f"metadata is not valid JSON: {exc.msg} at position {exc.pos}", field="metadata"
            ) from None
        except RecursionError:
            raise InvalidInput(
                f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels", field="metadata"
            ) from None
        except ValueError as exc:  # e.g. an integer literal with thousands of digits
            raise InvalidInput(f"metadata is not valid JSON: {exc}", field="metadata") from None
    if not isinstance(value, Mapping):
        raise InvalidInput(
            f"metadata must be a JSON object, not {type(value).__name__}", field="metadata"
        )
    _check_structure(value)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True)
        size = len(text.encode("utf-8"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"metadata is not JSON-serialisable: {exc}", field="metadata") from None
    if size > MAX_METADATA_BYTES:
        raise InvalidInput(
            f"metadata is larger than {MAX_METADATA_BYTES} bytes once serialised",
            field="metadata",
        )
    parsed: dict[str, Any] = json.loads(text)
    return parsed


#: A metadata filter's keys, and the values one key may allow.
MAX_FILTER_KEYS = 16
MAX_FILTER_VALUES = 100


def metadata_filter(value: object) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """A metadata filter: a JSON object mapping keys to one value or a list of allowed
    values (strings, numbers, true/false, null), e.g. ``{"user_id": "u7", "session": [3,
    4]}``; a string is parsed as JSON first. Keys in a stable order."""
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise InvalidInput("the metadata filter is not valid JSON", field="metadata") from None
    if not isinstance(value, Mapping):
        raise InvalidInput(
            "the metadata filter must be an object of key: value or key: [values]",
            field="metadata",
        )
    if len(value) > MAX_FILTER_KEYS:
        raise InvalidInput(
            f"a metadata filter has at most {MAX_FILTER_KEYS} keys", field="metadata"
        )
    out = []
    for key in sorted(value, key=str):
        if not isinstance(key, str) or not key or len(key) > 256:
            raise InvalidInput("metadata filter keys are non-empty strings", field="metadata")
        encodable(key, f"metadata filter key {_show(key)}", "metadata")
        allowed = value[key]
        allowed = list(allowed) if isinstance(allowed, list | tuple) else [allowed]
        if not allowed or len(allowed) > MAX_FILTER_VALUES:
            raise InvalidInput(
                f"metadata filter {key!r}: give 1..{MAX_FILTER_VALUES} values", field="metadata"
            )
        for item in allowed:
            scalar = item is None or isinstance(item, str | bool | int | float)
            if not scalar or (isinstance(item, float) and not math.isfinite(item)):
                raise InvalidInput(
                    f"metadata filter {key!r}: values are strings, numbers, true, false or null",
                    field="metadata",
                )
            if isinstance(item, str):
                encodable(item, f"metadata filter {key!r}: {_show(item)}", "metadata")
        out.append((key, tuple(allowed)))
    return tuple(out)


def timestamp(value: object, what: str = "event_time") -> datetime | None:
    """An ISO 8601 string or datetime, returned timezone-aware in UTC (naive means UTC)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        text = value.strip()
        if "\x00" in text or not text:
            raise InvalidInput(f"{what} is not an ISO 8601 timestamp: {_show(value)}", field=what)
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidInput(
                f"{what} is not an ISO 8601 timestamp: {_show(value)}", field=what
            ) from None
    else:
        raise InvalidInput(
            f"{what} must be an ISO 8601 string, not {type(value).__name__}", field=what
        )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        moment = moment.astimezone(UTC)
    except (OverflowError, ValueError):
        raise InvalidInput(f"{what} is out of range: {_show(value)}", field=what) from None
    if not _MIN_YEAR <= moment.year <= _MAX_YEAR:
        raise InvalidInput(f"{what} is out of range: {_show(value)}", field=what)
    return moment
