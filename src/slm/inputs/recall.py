"""A recall's filters and the channels it restricts itself to, checked."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from slm import validate
from slm.channels import registered
from slm.errors import InvalidInput
from slm.store import Filters


def filters_of(
    source: str | None,
    tags: Sequence[str],
    after: datetime | str | None,
    before: datetime | str | None,
    text: str | None = None,
    metadata: Mapping[str, Any] | str | None = None,
) -> Filters:
    """The checked filters of a recall or a listing."""
    return Filters(
        metadata=validate.metadata_filter(metadata),
        text=validate.contains(text),
        source=validate.source(source),
        tags=validate.tags(tags),
        after=validate.timestamp(after, "after"),
        before=validate.timestamp(before, "before"),
    )


def channel_names(names: object) -> tuple[str, ...]:
    """The checked channel names a recall restricts itself to (a list, or comma-separated)."""
    if isinstance(names, str):
        names = names.split(",")
    if not isinstance(names, Iterable) or isinstance(names, bytes | Mapping):
        raise InvalidInput("channels must be a list of channel names", field="channels")
    chosen: dict[str, None] = {}
    for name in names:
        if not isinstance(name, str):
            raise InvalidInput(
                f"channels must be channel names, not {type(name).__name__}", field="channels"
            )
        name = name.strip()
        if name and name not in registered():
            raise InvalidInput(
                f"unknown channel {name[:80]!r}; known: {', '.join(registered())}",
                field="channels",
            )
        if name:
            chosen[name] = None
    cleaned = tuple(chosen)
    if not cleaned:
        raise InvalidInput("channels names no channel", field="channels")
    return cleaned
