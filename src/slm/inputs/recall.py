"""A recall request checked (:func:`check`): its question, k, filters, the channels it
restricts itself to and the moment it reads relative times against."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from slm import validate
from slm.channels import registered
from slm.errors import InvalidInput
from slm.inputs import scope as owners
from slm.models import RecallRequest
from slm.settings import Settings
from slm.store import Filters


@dataclass(frozen=True, slots=True)
class Checked:
    """What a recall runs with, every option checked."""

    text: str
    k: int
    filters: Filters
    #: the settings, restricted to the channels the request names
    settings: Settings
    #: the moment relative times in the question are read against
    now: datetime
    #: whether memories superseded by now are left out
    hide_superseded: bool
    #: results below this relevance are left out (None: none are)
    min_relevance: float | None = None


def check(request: RecallRequest, settings: Settings) -> Checked:
    """``request`` checked against the library's limits (:class:`InvalidInput` naming the
    field otherwise), with ``settings`` restricted to its channels."""
    text = validate.query(request.query)
    k = validate.k(request.k)
    include_superseded = request.include_superseded
    if not isinstance(include_superseded, bool):
        raise InvalidInput("include_superseded must be true or false", field="include_superseded")
    as_of = validate.timestamp(request.as_of, "as_of")
    if as_of is not None and include_superseded:
        raise InvalidInput(
            "as_of answers with what held then; it cannot include superseded memories",
            field="as_of",
        )
    owner = owners.given(
        settings.scope_keys, request.user_id, request.agent_id, request.run_id, request.scope
    )
    metadata = owners.into_filter(request.metadata, owner)
    filters = filters_of(
        request.source, request.tags, request.after, request.before, metadata=metadata
    )
    if request.channels is not None:
        settings = settings.with_channels(channel_names(request.channels))
    moment = validate.timestamp(request.now, "now") or as_of or datetime.now(UTC)
    minimum = request.min_relevance
    return Checked(
        text,
        k,
        replace(filters, as_of=as_of),
        settings,
        moment,
        not include_superseded and as_of is None,
        None if minimum is None else validate.fraction(minimum, "min_relevance"),
    )


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
