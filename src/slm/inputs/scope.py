"""Whose memory: the scope keys given as named arguments (``user_id=``, ``agent_id=``,
``run_id=``, and the store's other scope keys in ``scope=``).

Metadata stays how they are stored: a named argument is merged into a memory's metadata
on write and into the metadata filter on read, so ``remember(text, user_id="alice")`` and
``remember(text, metadata={"user_id": "alice"})`` store the same memory. The same key
given both ways with different values is an :class:`InvalidInput` naming it
(docs/scopes.md).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from slm import validate
from slm.errors import InvalidInput
from slm.store.base import SCOPE_KEYS_META, Store

log = logging.getLogger(__name__)

#: The scope keys every surface takes by name (Mem0's), whatever the store's keys are.
NAMED = ("user_id", "agent_id", "run_id")
#: The longest text a scope value may be.
MAX_VALUE_CHARS = 256

#: A scope value given by name: text or a number (None: not given).
OwnerId = str | int | None


class Owner(TypedDict, total=False):
    """Whose memory, as every call takes it: ``**owner`` keyword arguments."""

    #: the user it belongs to, or whose memories to read
    user_id: OwnerId
    agent_id: OwnerId
    run_id: OwnerId
    #: values of the store's other scope keys (``{"tenant": "acme"}``)
    scope: Mapping[str, Any] | str | None


def given(
    keys: Sequence[str],
    user_id: OwnerId = None,
    agent_id: OwnerId = None,
    run_id: OwnerId = None,
    scope: Mapping[str, Any] | str | None = None,
) -> dict[str, Any]:
    """The scope the arguments name, checked: ``user_id``, ``agent_id`` and ``run_id`` (None:
    not given), and in ``scope`` (an object, or JSON text of one) values of the store's
    other scope ``keys`` (``tenant``, ``lg_ns.0``...). A key ``scope`` names that is none of
    ``keys`` is refused, naming it."""
    out: dict[str, Any] = {}
    for name, value in zip(NAMED, (user_id, agent_id, run_id), strict=True):
        if value is not None:
            out[name] = _value(name, value)
    for key, raw in _scope(scope).items():
        if key not in NAMED and not is_scope_key(key, keys):
            known = ", ".join(keys) or "none"
            raise InvalidInput(
                f"scope: {_show(key)} is not a scope key of this store (its keys: {known}; "
                "SLM_SCOPE_KEYS sets them)",
                field="scope",
            )
        checked = _value(key, raw)
        if key in out and not same(out[key], checked):
            raise InvalidInput(
                f"{key} is given as {_show(out[key])} and in scope as {_show(checked)}", field=key
            )
        out[key] = checked
    return out


def into_metadata(metadata: Mapping[str, Any] | str | None, owner: Mapping[str, Any]) -> Any:
    """``metadata`` with the scope ``owner`` names merged in (as given when ``owner`` is
    empty: checked where it always was)."""
    if not owner:
        return metadata
    merged = validate.metadata(metadata)
    for key, value in owner.items():
        if key in merged and not same(merged[key], value):
            raise InvalidInput(
                f"{key} is given as {_show(value)} and in metadata as {_show(merged[key])}",
                field=key,
            )
        merged[key] = value
    return merged


def into_filter(metadata: Mapping[str, Any] | str | None, owner: Mapping[str, Any]) -> Any:
    """The metadata filter ``metadata`` with the scope ``owner`` names required too."""
    if not owner:
        return metadata
    merged: dict[str, Any] = {k: list(v) for k, v in validate.metadata_filter(metadata)}
    for key, value in owner.items():
        held = merged.get(key)
        if held is not None and not (len(held) == 1 and same(held[0], value)):
            raise InvalidInput(
                f"{key} is given as {_show(value)} and in the metadata filter as "
                f"{_show(held if len(held) > 1 else held[0])}",
                field=key,
            )
        merged[key] = [value]
    return merged


def same(a: object, b: object) -> bool:
    """Equal and of one JSON type (``1``, ``"1"`` and ``true`` are three users)."""
    return type(a) is type(b) and a == b


def is_scope_key(key: str, keys: Sequence[str]) -> bool:
    """Whether ``key`` is one of the scope ``keys`` (or starts as a ``prefix*`` one does)."""
    return any(key == k or (k.endswith("*") and key.startswith(k[:-1])) for k in keys)


def _scope(scope: Mapping[str, Any] | str | None) -> Mapping[str, Any]:
    if scope is None:
        return {}
    if isinstance(scope, str):
        try:
            scope = json.loads(scope)
        except (ValueError, RecursionError):
            raise InvalidInput("scope is not valid JSON", field="scope") from None
    if not isinstance(scope, Mapping):
        raise InvalidInput("scope must be an object of scope key: value", field="scope")
    for key in scope:
        if not isinstance(key, str) or not key:
            raise InvalidInput("scope keys are non-empty strings", field="scope")
    return scope


def _value(name: str, value: object) -> str | int | float | bool:
    """A scope value: non-empty text (at most :data:`MAX_VALUE_CHARS` characters), a
    number or true/false."""
    if isinstance(value, str):
        if not value.strip():
            raise InvalidInput(f"{name} must not be empty", field=name)
        if len(value) > MAX_VALUE_CHARS:
            raise InvalidInput(
                f"{name} is {len(value)} characters; the limit is {MAX_VALUE_CHARS}", field=name
            )
        return validate.encodable(value, name, name)
    if isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    raise InvalidInput(f"{name} must be text or a number, not {type(value).__name__}", field=name)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def adopt_keys(store: Store, keys: Sequence[str]) -> None:
    """Make ``store``'s memories' scopes follow ``keys``: a store written with other keys
    (or by a release without scopes) has its scopes read again, once."""
    stored = store.meta(SCOPE_KEYS_META)
    if stored is None or json.loads(stored) != list(keys):
        changed = store.rescope(list(keys))
        if changed:
            log.info("slm: %d memories took the scope their metadata gives", changed)


def recorded_keys(store: Store, keys: tuple[str, ...]) -> tuple[str, ...]:
    """The scope keys ``store`` records now (one row by its key, as cheap as the change
    feed's check), else ``keys``. When another process opened the store with other keys
    since, and so read every memory's scope again with those, a write must take them
    (logged) rather than write with keys the stored scopes no longer follow."""
    stored = store.meta(SCOPE_KEYS_META)
    if stored is None or (recorded := tuple(json.loads(stored))) == keys:
        return keys
    log.warning(
        "slm: the store's scope keys changed from %s to %s in another process; writes follow them",
        list(keys),
        list(recorded),
    )
    return recorded
