"""What a forget asks for, checked (:func:`check`): ids, or a filter (an owner, metadata),
or everything said explicitly; never two of them, never nothing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from slm import validate
from slm.errors import InvalidInput
from slm.inputs import scope as owners
from slm.store import Filters


@dataclass(frozen=True, slots=True)
class Forgetting:
    """Which memories a forget removes: ``ids``, or (``ids`` None) those ``filters`` admit
    (empty filters: every memory of the profile, asked for as ``all``)."""

    ids: list[str] | None
    filters: Filters
    #: only say which would go
    dry_run: bool


def check(
    ids: str | Iterable[str] | None,
    owner: Mapping[str, Any],
    metadata: Mapping[str, Any] | str | None,
    everything: object,
    dry_run: object,
) -> Forgetting:
    """The forget asked for, from its ids, its ``owner`` (checked by
    :func:`slm.inputs.scope.given`), its metadata filter and its ``all``; :class:`InvalidInput`
    for ids and a filter together, ``all`` with either, or none of them."""
    chosen = owners.into_filter(metadata, owner)
    dry = validate.flag(dry_run, "dry_run")
    if validate.flag(everything, "all") and (ids is not None or chosen):
        raise InvalidInput("all forgets every memory: give it without ids or a filter",
                           field="all")  # fmt: skip
    if ids is not None:
        if chosen:
            raise InvalidInput(
                "forget takes ids or a filter (user_id, metadata...), not both", field="ids"
            )
        return Forgetting(validate.memory_ids(ids), Filters(), dry)
    filters = Filters(metadata=validate.metadata_filter(chosen))
    if not everything and filters.is_empty():
        raise InvalidInput(
            "forget needs ids, an owner (user_id...) or a metadata filter; to forget every "
            "memory of the profile, say all",
            field="ids",
        )
    return Forgetting(None, filters, dry)
