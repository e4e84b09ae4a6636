"""A LangGraph long-term memory store backed by slm (the ``langgraph`` extra).

    from slm.integrations.langgraph import SlmStore
    store = SlmStore(memory)                      # one slm profile holds every namespace
    alices = SlmStore(memory, user_id="alice")    # or: only alice's memories, as hers
    graph = builder.compile(store=store)          # then, in a node:
    store.put(("users", "u7"), "home", {"text": "Maya moved to Lisbon"})
    store.search(("users", "u7"), query="Where does Maya live?", limit=3)

How LangGraph's model maps onto slm's:

- **Namespaces are metadata, not profiles.** Every item lives in the one profile of the
  :class:`slm.Memory` given; its namespace and key are kept in the memory's metadata
  (``lg_ns.0``, ``lg_ns.1``... one key per level, ``lg_key``), so a search of a namespace
  prefix is a metadata filter, applied before ranking. Use one ``Memory`` per profile to keep
  tenants apart as slm does everywhere.
- **An item's text is what slm reads**: the value's ``text``, ``content`` or ``memory``
  field, else the whole value as JSON. The value itself is kept whole (``lg_value``), and
  its top-level plain fields are also kept as ``lg_v.<field>`` so ``filter=`` works.
- **A namespace is a scope** (docs/scopes.md): its levels are scope keys (``lg_ns.*``),
  so the same text under two namespaces is two memories, and nothing found in one
  namespace (a probable update, a neighbour) ever links it to another's.
- **An owner, if given, holds for every call**: ``SlmStore(memory, user_id="alice")``
  stores each item as alice's (``user_id`` in its metadata, as every slm surface does) and
  gets, searches and lists only hers, so one graph's store never reads another user's.
- **put replaces**: the new item is stored, then the memory held under that namespace and
  key is forgotten; slm stores identical text once per scope, so the same text under a
  second key of the same namespace is refused with a clear error (and nothing changed)
  rather than shared silently. ``put(..., None)`` (and ``delete``) forgets it.
- **search with a query is slm's recall** (ranking, lifecycle); ``score`` is the
  ``relevance_score``, which says how strongly each item answers (LangGraph's search has
  no place for slm's abstention: read the scores). Without a query, items come
  newest first. ``ttl`` and ``refresh_ttl`` are not supported (items do not expire).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from slm.engine import Memory
from slm.errors import ConfigError, InvalidInput, install_hint
from slm.models import MemoryRecord

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
except ImportError as exc:  # the extra is optional; say which one instead of a traceback
    raise ConfigError(f"the LangGraph store needs the extra: {install_hint('langgraph')}") from exc

#: The most items one namespace listing reads.
SCAN = 10_000
_TEXT_FIELDS = ("text", "content", "memory")


class SlmStore(BaseStore):
    """LangGraph's ``BaseStore`` over one slm profile."""

    def __init__(
        self,
        memory: Memory,
        *,
        user_id: str | int | None = None,
        agent_id: str | int | None = None,
        run_id: str | int | None = None,
    ) -> None:
        self.memory = memory
        owner = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        #: whose items these are: merged into every write and read
        self.owner: dict[str, Any] = {k: v for k, v in owner.items() if v is not None}

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self._one(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _one(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            found = self._held(op.namespace, op.key)
            return _item(found[0]) if found else None
        if isinstance(op, PutOp):
            self._put(op.namespace, op.key, op.value)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise InvalidInput(f"unknown store operation {type(op).__name__}")

    def _held(self, namespace: tuple[str, ...], key: str) -> list[MemoryRecord]:
        rule = {**_prefix(namespace), "lg_depth": len(namespace), "lg_key": key}
        return self.memory.list(SCAN, metadata=rule, **self.owner)

    def _put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any] | None) -> None:
        old = [r.id for r in self._held(namespace, key)]
        if value is None:
            self.memory.forget(old, missing_ok=True)
            return
        text = _text(value)
        plain = {f"lg_v.{k}": v for k, v in value.items() if _plain(v)}
        metadata = {**plain, **_prefix(namespace), "lg_depth": len(namespace), "lg_key": key,
                    "lg_value": value}  # fmt: skip
        # Stored first, the old item forgotten after: a refused put leaves the store as it was.
        done = self.memory.remember(text, metadata=metadata, **self.owner)
        if done.created:
            self.memory.forget(old, missing_ok=True)
            return
        if done.id not in old:  # the same text is another item of this scope
            where = (
                f"key {done.metadata.get('lg_key')!r} of this namespace"
                if _namespace(done.metadata) == namespace
                else "another item of the same scope"  # scope keys without lg_ns.*
            )
            raise InvalidInput(
                f"this text is already stored under {where}: slm keeps identical text once "
                "per scope (docs/scopes.md)",
                field="value",
            )
        stored_as = {**metadata, **self.owner}
        if dict(done.metadata) != stored_as:  # the same text, another value: stored anew
            self.memory.forget(old, missing_ok=True)
            self.memory.remember(text, metadata=metadata, **self.owner)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        rule: dict[str, Any] = dict(_prefix(op.namespace_prefix))
        for field, wanted in (op.filter or {}).items():
            if not _plain(wanted) and not isinstance(wanted, list):
                raise InvalidInput(
                    f"filter {field!r}: compare a top-level field with a value", field="filter"
                )
            rule[f"lg_v.{field}"] = wanted
        rule.setdefault("lg_depth", list(range(len(op.namespace_prefix), 64)))
        if op.query:
            k = op.limit + op.offset
            response = self.memory.recall(op.query, k=k, metadata=rule, **self.owner)
            chosen = response.results[op.offset :]
            return [_item(r.memory, r.relevance_score, search=True) for r in chosen]
        records = self.memory.list(op.limit, op.offset, metadata=rule, **self.owner)
        return [_item(r, search=True) for r in records]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found: set[tuple[str, ...]] = set()
        offset = 0
        every = {"lg_depth": list(range(64))}
        while records := self.memory.list(SCAN, offset, metadata=every, **self.owner):
            for record in records:
                namespace = _namespace(record.metadata)
                if op.max_depth is not None:
                    namespace = namespace[: op.max_depth]
                found.add(namespace)
            offset += len(records)
        kept = [n for n in sorted(found) if all(_matches(n, c) for c in op.match_conditions or ())]
        return kept[op.offset : op.offset + op.limit]


def _matches(namespace: tuple[str, ...], condition: Any) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(want in ("*", have) for want, have in zip(path, part, strict=True))


def _prefix(namespace: tuple[str, ...]) -> dict[str, Any]:
    return {f"lg_ns.{level}": label for level, label in enumerate(namespace)}


def _namespace(metadata: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(metadata[f"lg_ns.{level}"]) for level in range(int(metadata["lg_depth"])))


def _text(value: Mapping[str, Any]) -> str:
    for field in _TEXT_FIELDS:
        if isinstance(value.get(field), str) and value[field].strip():
            return str(value[field])
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | bool | int | float)


def _item(record: MemoryRecord, score: float | None = None, *, search: bool = False) -> Any:
    """The record as LangGraph's ``Item``, or a ``SearchItem`` (``score``: None without a
    query)."""
    meta = record.metadata
    namespace, key, value = _namespace(meta), str(meta["lg_key"]), dict(meta["lg_value"])
    moment: datetime = record.recorded_at
    if search:
        return SearchItem(namespace, key, value, moment, moment, score=score)
    return Item(value=value, key=key, namespace=namespace, created_at=moment, updated_at=moment)
