"""Checks applied at the library boundary; the adapters inherit them.

Every check raises :class:`~slm.errors.InvalidInput` with a message that names the
argument and the rule. The limits are part of the public contract (docs/limits.md).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from slm.errors import InvalidInput

MAX_CONTENT_BYTES = 64 * 1024
MAX_QUERY_BYTES = 4 * 1024
MAX_METADATA_BYTES = 16 * 1024
MAX_SOURCE_CHARS = 256
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_K = 1000
MAX_BATCH = 10_000
MAX_LIST_LIMIT = 10_000
MAX_IDS_PER_CALL = 10_000
PROFILE_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_ID_PATTERN = re.compile(r"[0-9a-f]{16}")
_MIN_YEAR, _MAX_YEAR = 1, 9999


def _clean_text(value: object, what: str, max_bytes: int) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, not {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character")
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid Unicode (lone surrogate)") from None
    if len(encoded) > max_bytes:
        raise InvalidInput(f"{what} is {len(encoded)} bytes; the limit is {max_bytes} bytes")
    text = unicodedata.normalize("NFC", value).strip()
    if not text:
        raise InvalidInput(f"{what} is empty")
    return text


def content(value: object) -> str:
    """Memory text: non-empty after stripping, valid Unicode, no NUL, at most 64 KiB UTF-8."""
    return _clean_text(value, "content", MAX_CONTENT_BYTES)


def query(value: object) -> str:
    """Recall query: non-empty, valid Unicode, no NUL, at most 4 KiB UTF-8."""
    return _clean_text(value, "query", MAX_QUERY_BYTES)


def profile(value: object) -> str:
    if not isinstance(value, str) or not PROFILE_PATTERN.fullmatch(value):
        raise InvalidInput(f"profile must match [A-Za-z0-9_.-]{{1,64}}, got {value!r}")
    return value


def memory_id(value: object) -> str:
    if not isinstance(value, str) or not _ID_PATTERN.fullmatch(value):
        raise InvalidInput(f"memory id must be 16 lowercase hex characters, got {value!r:.80}")
    return value


def memory_ids(values: Iterable[object]) -> list[str]:
    if isinstance(values, str):
        values = [values]
    ids = [memory_id(v) for v in values]
    if len(ids) > MAX_IDS_PER_CALL:
        raise InvalidInput(f"{len(ids)} ids in one call; the limit is {MAX_IDS_PER_CALL}")
    return list(dict.fromkeys(ids))


def k(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"k must be an integer, not {type(value).__name__}")
    if not 1 <= value <= MAX_K:
        raise InvalidInput(f"k must be in 1..{MAX_K}, got {value}")
    return value


def limit_offset(limit: object, offset: object) -> tuple[int, int]:
    for name, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(f"{name} must be an integer")
    assert isinstance(limit, int) and isinstance(offset, int)
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidInput(f"limit must be in 1..{MAX_LIST_LIMIT}, got {limit}")
    if offset < 0:
        raise InvalidInput(f"offset must be >= 0, got {offset}")
    return limit, offset


def confidence(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"confidence must be a number in 0..1, not {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InvalidInput(f"confidence must be in 0..1, got {value}")
    return number


def source(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"source must be a string, not {type(value).__name__}")
    text = _clean_text(value, "source", MAX_SOURCE_CHARS * 4)
    if len(text) > MAX_SOURCE_CHARS:
        raise InvalidInput(f"source is {len(text)} characters; the limit is {MAX_SOURCE_CHARS}")
    return text


def tags(values: object) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise InvalidInput("tags must be a list of strings")
    cleaned: list[str] = []
    for value in values:
        tag = _clean_text(value, "tag", MAX_TAG_CHARS * 4)
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidInput(f"tag {tag[:20]!r}... is longer than {MAX_TAG_CHARS} characters")
        cleaned.append(tag)
    unique = tuple(dict.fromkeys(cleaned))
    if len(unique) > MAX_TAGS:
        raise InvalidInput(f"{len(unique)} tags; the limit is {MAX_TAGS}")
    return unique


def metadata(value: object) -> dict[str, Any]:
    """A JSON object (dict with string keys), at most 16 KiB once serialised."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                f"metadata is not valid JSON: {exc.msg} at position {exc.pos}"
            ) from None
    if not isinstance(value, Mapping):
        raise InvalidInput(f"metadata must be a JSON object, not {type(value).__name__}")
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True)
        text.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise InvalidInput(f"metadata is not JSON-serialisable: {exc}") from None
    if "\x00" in text:
        raise InvalidInput("metadata contains a NUL character")
    if len(text.encode("utf-8")) > MAX_METADATA_BYTES:
        raise InvalidInput(f"metadata is larger than {MAX_METADATA_BYTES} bytes once serialised")
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def timestamp(value: object, what: str = "event_time") -> datetime | None:
    """An ISO 8601 string or datetime, returned timezone-aware in UTC (naive means UTC)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        text = value.strip()
        if "\x00" in text or not text:
            raise InvalidInput(f"{what} is not an ISO 8601 timestamp: {value!r:.80}")
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidInput(f"{what} is not an ISO 8601 timestamp: {value!r:.80}") from None
    else:
        raise InvalidInput(f"{what} must be an ISO 8601 string, not {type(value).__name__}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        moment = moment.astimezone(UTC)
    except (OverflowError, ValueError):
        raise InvalidInput(f"{what} is out of range: {value!r:.80}") from None
    if not _MIN_YEAR <= moment.year <= _MAX_YEAR:
        raise InvalidInput(f"{what} is out of range: {value!r:.80}")
    return moment
