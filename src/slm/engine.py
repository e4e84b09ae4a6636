"""``Memory``: the library API. Validates at the boundary, then delegates.

Writing: validate -> hash (idempotent per profile) -> derive (terms, embedding) -> one
store transaction. Reading: validate -> :func:`slm.recall.recall` (the read path).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from types import TracebackType
from typing import Any, Unpack

from slm import validate
from slm.calibrate.artefact import Calibration, fingerprint
from slm.channels import Channel, build_channels, enabled
from slm.channels import health as channel_state
from slm.contract import RecallResponse
from slm.embed import Embedder, make_embedder
from slm.embed.questions import Questions
from slm.errors import ChannelUnavailable, ConfigError, InvalidInput, NotFound, SlmError
from slm.history import History
from slm.history import history as history_of
from slm.index import Indexes
from slm.ingest import stage
from slm.inputs import forgetting
from slm.inputs import scope as owners
from slm.inputs.memories import MemoryInput, check_item, owned_items
from slm.inputs.recall import channel_names, check, filters_of
from slm.inputs.scope import Owner
from slm.learn.adapt import Learning, feedback_event
from slm.learn.rerank import Reranking
from slm.models import MemoryRecord, RecallRequest, Remembered, RememberedConversation, content_hash
from slm.recall import recall as read
from slm.recall.fusion import source_trust
from slm.recall.reader import Reader
from slm.settings import Settings, default_db_path, index_dir
from slm.store import Location, Store, open_store
from slm.store.base import FeedbackEvent, Filters

__all__ = ["Memory", "MemoryInput", "Remembered", "content_hash"]

log = logging.getLogger("slm")
log.addHandler(logging.NullHandler())

_EMBEDDER_META = "embedder"


class Memory:
    """A memory store for one profile.

    Args:
        path: SQLite file (default: ``SLM_DB``, else ``memory.db`` in ``SLM_HOME`` or the
            platform's user data directory), or a :class:`slm.store.Location`.
        dsn: a PostgreSQL DSN instead of a file.
        profile: the tenant; memories of other profiles are never seen.
        settings: tunables; default :meth:`Settings.from_env`.
        embedder: an embedder object, overriding ``settings.embedder``.
    """

    def __init__(
        self,
        path: str | Path | Location | None = None,
        *,
        dsn: str | None = None,
        profile: str = "default",
        settings: Settings | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings if settings is not None else Settings.from_env()
        self.profile = validate.profile(profile)
        self.embedder = embedder if embedder is not None else make_embedder(self.settings.embedder)
        if isinstance(path, Location):
            location = path
        elif dsn is not None:
            location = Location(dsn=dsn)
        else:
            location = Location(path=Path(path) if path is not None else default_db_path())
        # The thread starts on first use, so an instance that fails to open leaves none behind.
        self._questions = Questions(self.embedder)
        folder = index_dir() if location.dsn is not None else None
        store = open_store(location, self.embedder.dim, folder)
        self.store: Store = store
        #: what recall reads in process beside the store, following its change feed
        self.indexes = Indexes(store)
        try:
            self._check_embedder()
            self._check_scope_keys()
            self.channels: dict[str, Channel] = build_channels(self.settings)
            self._channel_errors: dict[str, str] = {}
            self._check_required_channels()
            self.learning = Learning(self.store, self.profile, self.settings, self.recall_with)
            self.reader = (
                None
                if self.settings.reader is None
                else Reader(
                    self.settings.reader, self.settings.reader_top, self.settings.reader_pieces
                )
            )
            self.calibration: Calibration | None = None
            if self.settings.calibration is not None:
                self.use_calibration(self.settings.calibration)
        except BaseException:
            self.store.close()
            raise

    def _check_embedder(self) -> None:
        stored = self.store.meta(_EMBEDDER_META)
        if stored is None:
            self.store.set_meta(_EMBEDDER_META, self.embedder.name)
        elif stored != self.embedder.name:
            raise ConfigError(
                f"this store holds vectors of embedder {stored!r}, not {self.embedder.name!r}; "
                "open it with the same embedder"
            )

    def _check_scope_keys(self) -> None:
        """Memories' scopes follow the scope keys in force (:func:`owners.adopt_keys`)."""
        owners.adopt_keys(self.store, self.settings.scope_keys)

    def scope_keys(self) -> tuple[str, ...]:
        """The scope keys a write reads scopes with: the ones the store records now, which
        another process may have changed since this ``Memory`` opened (docs/scopes.md)."""
        keys = owners.recorded_keys(self.store, self.settings.scope_keys)
        if keys != self.settings.scope_keys:
            self.settings = replace(self.settings, scope_keys=keys)
        return keys

    def _check_required_channels(self) -> None:
        for name in self.settings.required_channels:
            if name not in enabled(self.settings):
                raise ChannelUnavailable(f"required channel {name!r} is disabled by settings")
            state = self.channel_health(name)
            if not state["healthy"]:
                raise ChannelUnavailable(
                    f"required channel {name!r} is unhealthy: {state['reason']}"
                )

    def channel_health(self, name: str, counts: Mapping[str, int] | None = None) -> dict[str, Any]:
        """Health of one channel: its own check, its last error, its index's completeness."""
        channel = self.channels.get(name)
        if counts is None and channel is not None and channel.index is not None:
            counts = self.store.index_counts(self.profile)
        on = name in enabled(self.settings)
        return channel_state(channel, on, self._channel_errors.get(name), counts)

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._questions.close()
        self.learning.close()
        self.indexes.close()
        self.store.close()

    # -- writing ------------------------------------------------------------------------

    def remember(
        self,
        content: str,
        *,
        event_time: datetime | str | None = None,
        source: str | None = None,
        confidence: float = 1.0,
        metadata: Mapping[str, Any] | str | None = None,
        tags: Sequence[str] = (),
        supersedes: Sequence[str] = (),
        valid_from: datetime | str | None = None,
        **owner: Unpack[Owner],
    ) -> Remembered:
        """Store one memory and say what was done (it reads as the stored memory too);
        identical content (of the same owner) returns the stored one, with ``created`` False.

        ``supersedes`` names stored memories this one replaces: they stop holding when it
        starts (``valid_from``, default its event time) and recall leaves them out.
        The owner, ``user_id``, ``agent_id``, ``run_id`` (the store's other scope keys in
        ``scope``), says whose memory it is: it is kept in its metadata (docs/scopes.md).
        """
        item = MemoryInput(
            content,
            event_time,
            source,
            confidence,
            metadata,
            tags,
            supersedes=supersedes,
            valid_from=valid_from,
            **owner,
        )
        return self.store_many([item])[0]

    def update(
        self,
        memory_id: str,
        content: str,
        *,
        event_time: datetime | str | None = None,
        source: str | None = None,
        confidence: float | None = None,
        metadata: Mapping[str, Any] | str | None = None,
        tags: Sequence[str] | None = None,
        valid_from: datetime | str | None = None,
    ) -> Remembered:
        """Store ``content`` as a new memory that supersedes memory ``memory_id`` (which stays
        readable, with ``valid_to`` and ``superseded_by`` set). Fields not given are the old
        memory's, except the event time (default: now)."""
        old = self.get(memory_id)
        item = MemoryInput(
            content,
            event_time,
            old.source if source is None else source,
            old.confidence if confidence is None else confidence,
            old.metadata if metadata is None else metadata,
            old.tags if tags is None else tags,
            supersedes=(old.id,),
            valid_from=valid_from,
        )
        return self.store_many([item])[0]

    def unlink(self, older_id: str, newer_id: str) -> None:
        """Say that memory ``newer_id`` does not replace memory ``older_id``: a probable
        update found between them is removed and not found again, and a supersession is
        ended (the older memory holds again). Nothing is deleted."""
        older, newer = self.get(older_id).id, self.get(newer_id).id
        if not self.store.versions.dismiss(self.profile, older, newer):
            raise InvalidInput(
                f"memory {newer} does not replace memory {older}: there is no link to undo",
                field="newer_id",
            )

    def remember_many(
        self,
        items: Iterable[MemoryInput | Mapping[str, Any]],
        **owner: Unpack[Owner],
    ) -> list[Remembered]:
        """Store a batch in one transaction with batched embedding; what was done with each
        item, in order (:meth:`store_many`). The whole batch is validated first: one bad
        item rejects the batch and stores nothing. An item may say whose it is
        (``user_id``...) as :meth:`remember` does; given here, it holds for every item."""
        batch = self._owner(owner)
        return self.store_many(owned_items(items, batch) if batch else items)

    def remember_conversation(
        self,
        conversation: object,
        *,
        session: str | None = None,
        system: str = "skip",
        metadata: Mapping[str, Any] | str | None = None,
        **owner: Unpack[Owner],
    ) -> RememberedConversation:
        """Store a chat conversation as it is, one memory per message with its speaker, role,
        session and time (:mod:`slm.inputs.conversations`). System messages are left out and
        counted, or with ``system="keep"`` stored as standing instructions. ``metadata`` and
        the owner (``user_id``...) are kept with every message. All or nothing: checked whole
        first, and a failure while storing it leaves none of it stored."""
        from slm.inputs import conversations

        extra = owners.into_metadata(metadata, self._owner(owner))
        read = conversations.read(conversation, session=session, system=system, metadata=extra)
        with stage.AllOrNothing(self.store, self.profile) as whole:
            done = [whole.add(self.store_many(part)) for part in conversations.batches(read.items)]
        return RememberedConversation(tuple(d for part in done for d in part), read.system_skipped)

    def store_many(self, items: Iterable[MemoryInput | Mapping[str, Any]]) -> list[Remembered]:
        """:meth:`remember_many`, saying for each item whether it was stored now
        (``created``) or its content was already stored (the first of several identical
        items in one batch is the one created)."""
        if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
            raise InvalidInput("items must be a list of memories", field="items")
        batch = list(islice(items, validate.MAX_BATCH + 1))
        if len(batch) > validate.MAX_BATCH:
            raise InvalidInput(
                f"more than {validate.MAX_BATCH} items in one batch; "
                f"the limit is {validate.MAX_BATCH}",
                field="items",
            )
        now, numbered = datetime.now(UTC), len(batch) > 1
        auto = self.settings.update_policy == "auto"
        with self.store.writing(self.profile):  # the keys read on the write's connection
            keys = self.scope_keys()
            checked = [check_item(i, item, now, numbered, keys) for i, item in enumerate(batch)]
            return stage.write(
                self.store, self.indexes.vectors, self.profile, self.embedder, checked, auto=auto
            )

    def _owner(self, owner: Owner) -> dict[str, Any]:
        """The owner given by name, checked against the store's scope keys."""
        return owners.given(self.settings.scope_keys, **owner)

    def validate_item(self, item: MemoryInput | Mapping[str, Any]) -> None:
        """Raise :class:`InvalidInput` if ``remember_many`` would reject ``item``; store nothing."""
        check_item(0, item, datetime.now(UTC), False, self.scope_keys())

    def forget(
        self,
        ids: str | Iterable[str] | None = None,
        *,
        metadata: Mapping[str, Any] | str | None = None,
        all: bool = False,
        dry_run: bool = False,
        missing_ok: bool = False,
        **owner: Unpack[Owner],
    ) -> list[str]:
        """Remove memories, and every index entry derived from them, in one transaction;
        the ids removed (``dry_run``: that would be). By ``ids`` (one not in the profile is
        :class:`NotFound` and none is removed, unless ``missing_ok``), or every memory of an
        owner (``user_id``...) or ``metadata`` filter, or with ``all`` every one."""
        asked = forgetting.check(ids, self._owner(owner), metadata, all, dry_run)
        if asked.ids is None:
            return self.store.delete_matching(self.profile, asked.filters, asked.dry_run)
        held = {r.id for r in self.store.get(self.profile, asked.ids)}
        missing = [i for i in dict.fromkeys(asked.ids) if i not in held]
        if missing and not missing_ok:
            gone = f"{', '.join(missing)} (nothing was forgotten)"
            raise NotFound(f"not found in profile {self.profile!r}: {gone}")
        if asked.dry_run:
            return [i for i in dict.fromkeys(asked.ids) if i in held]
        return self.store.delete(self.profile, asked.ids)

    def feedback(self, memory_id: str, *, useful: bool, query_id: str | None = None) -> float:
        """Record whether a memory was useful, for the recall ``query_id`` names (from its
        response) or in general. It counts toward the trust of the memory's source and,
        with a ``query_id`` and learning on, trains this profile's ranker
        (docs/learning.md). Returns the source's new ``trust_score``.
        """
        useful = validate.flag(useful, "useful")
        query_id = validate.query_id(query_id)
        record = self.get(memory_id)
        entry = self.learning.logged_recall(query_id) if query_id is not None else None
        event = feedback_event(record.id, useful, query_id)
        self.store.feedback.add(self.profile, record.source or "", useful, event)
        try:
            self.learning.after_feedback(event, entry)
        except SlmError as exc:  # the feedback is kept; learning tries again with the next
            log.warning("slm: learning from feedback failed: %s", exc)
        return self.source_trust(record.source)

    def feedback_report(
        self, memory_id: str, *, useful: bool, query_id: str | None = None
    ) -> dict[str, Any]:
        """:meth:`feedback`, answered as the adapters report it: what was recorded, the
        source's new trust and the state of this profile's ranker."""
        trust = self.feedback(memory_id, useful=useful, query_id=query_id)
        return {
            "memory_id": memory_id,
            "useful": useful,
            "query_id": query_id,
            "source_trust": round(trust, 6),
            "ranking": self.learning.describe(),
        }

    def feedback_events(self, limit: int = 20, offset: int = 0) -> list[FeedbackEvent]:
        """The profile's feedback, newest first."""
        limit, offset = validate.limit_offset(limit, offset)
        return self.store.feedback.events(self.profile, limit, offset)

    def reset_feedback(self) -> int:
        """Forget this profile's feedback, its recall log, its sources' trust and its
        learned ranker; returns how many feedback events were forgotten."""
        return self.learning.reset()

    def source_trust(self, source: str | None) -> float:
        """The ``trust_score`` of a source's memories (docs/scoring.md, "Trust")."""
        name = source or ""
        counts = self.store.feedback.trust(self.profile, [name]).get(name, (0, 0))
        return source_trust(*counts, prior=self.settings.trust_prior)

    def reindex(self, batch: int = 500, progress: Callable[[int], None] | None = None) -> int:
        """Rebuild every derived index of the profile (lexical, entities, dates, graph) from
        the stored memories and their stored embeddings; returns how many were reindexed
        (``progress`` is told each batch's size as it is done)."""
        self.indexes.rebuild(self.profile)
        done, after = 0, 0
        while records := self.store.scan(self.profile, after, batch):
            vectors = self.indexes.vectors
            items = stage.rederive(self.store, vectors, self.profile, self.embedder, records)
            self.store.rederive(self.profile, items)
            done += len(records)
            if progress is not None:
                progress(len(records))
            after = records[-1].key
        return done

    # -- reading ------------------------------------------------------------------------

    def get(self, memory_id: str) -> MemoryRecord:
        found = self.store.get(self.profile, [validate.memory_id(memory_id)])
        if not found:
            raise NotFound(f"no memory with id {memory_id} in profile {self.profile!r}")
        return found[0]

    def history(self, memory_id: str) -> History:
        """What memory ``memory_id`` replaced and what replaced it, stated or probable, and
        its versions to the current one (:mod:`slm.history`)."""
        return history_of(self.store, self.profile, self.get(memory_id))

    def get_many(self, memory_ids: Iterable[str]) -> list[MemoryRecord]:
        """The memories with these ids, in the order given; ids not in the profile are
        left out."""
        return self.store.get(self.profile, validate.memory_ids(memory_ids))

    def list(
        self,
        limit: int = 20,
        offset: int = 0,
        *,
        source: str | None = None,
        tags: Sequence[str] = (),
        after: datetime | str | None = None,
        before: datetime | str | None = None,
        text: str | None = None,
        metadata: Mapping[str, Any] | str | None = None,
        **owner: Unpack[Owner],
    ) -> list[MemoryRecord]:
        """Memories, most recently recorded first; with ``text``, only those whose content
        contains it (case-insensitive for ASCII letters); with ``metadata``, only those whose
        metadata holds one of the values given for each key; with ``user_id``... only that
        owner's."""
        limit, offset = validate.limit_offset(limit, offset)
        metadata = owners.into_filter(metadata, self._owner(owner))
        filters = filters_of(source, tags, after, before, text, metadata)
        return self.store.page(self.profile, limit, offset, filters)

    def count(
        self, *, metadata: Mapping[str, Any] | str | None = None, **owner: Unpack[Owner]
    ) -> int:
        """How many memories the profile holds (of an owner, or matching ``metadata``)."""
        chosen = owners.into_filter(metadata, self._owner(owner))
        return self.store.count(self.profile, Filters(metadata=validate.metadata_filter(chosen)))

    def recall(
        self,
        query: str,
        *,
        k: int = 10,
        trace: bool = False,
        source: str | None = None,
        tags: Sequence[str] = (),
        after: datetime | str | None = None,
        before: datetime | str | None = None,
        channels: Sequence[str] | None = None,
        now: datetime | str | None = None,
        include_superseded: bool = False,
        as_of: datetime | str | None = None,
        metadata: Mapping[str, Any] | str | None = None,
        min_relevance: float | None = None,
        **owner: Unpack[Owner],
    ) -> RecallResponse:
        """The memories most relevant to ``query``, as a score-contract-v2 response.

        Filters (``source``, ``tags`` all present, event time in ``[after, before)``,
        ``metadata`` holding one of the values given per key) restrict the candidates;
        ``channels`` restricts which channels run for this call; ``now`` anchors relative
        time expressions in the query (default: ``as_of``, else the current time).
        Memories superseded by then are left out unless ``include_superseded``; ``as_of``
        answers with the memories that held at that moment (docs/lifecycle.md). ``user_id``,
        ``agent_id``, ``run_id`` (and ``scope``) answer from that owner's memories only
        (docs/scopes.md). Results whose
        ``relevance_score`` is below ``min_relevance`` (0..1) are left out. With the
        reranker on (``Settings.rerank``), a learned model reorders the top
        (docs/learning.md). The response's ``query_id`` names this recall for
        :meth:`feedback`.
        """
        return self.recall_request(
            RecallRequest(
                query,
                k,
                trace,
                source,
                tags,
                after,
                before,
                channels,
                now,
                include_superseded,
                as_of,
                metadata,
                min_relevance,
                **owner,
            )
        )

    def recall_request(self, request: RecallRequest) -> RecallResponse:
        """:meth:`recall` of a request built whole (what every adapter passes)."""
        reranking = self.learning.reranking()
        response = self.recall_with(reranking, request)
        calibration = self.calibration  # read once: use_calibration may swap it meanwhile
        if calibration is not None:
            every = set(enabled(self.settings))
            whole = request.channels is None or set(channel_names(request.channels)) == every
            response = calibration.apply(
                response,
                ranker=reranking.model_id if reranking else None,
                restricted=not whole or request.min_relevance is not None,
            )
        return self.learning.logged(response, request)

    def fingerprint(self) -> dict[str, Any]:
        """The identity of this release and retrieval configuration that a calibration
        artefact must match (``slm.calibrate.artefact.fingerprint``)."""
        base = self.learning.base
        return fingerprint(
            self.settings,
            self.channels,
            self.embedder.name,
            base.id if base else None,
            self.store.kind,
            self.reader.id if self.reader else None,
        )

    def use_calibration(self, path: str | Path | None) -> None:
        """Report ``answer_confidence`` from the calibration artefact at ``path`` (None:
        stop). An artefact that was edited, did not pass the gate, or was fitted for another
        release or configuration raises :class:`CalibrationError`, and recall stays as it
        was (docs/calibration.md)."""
        self.calibration = None if path is None else Calibration.load(path, self.fingerprint())

    def recall_with(
        self, reranking: Reranking | None, request: RecallRequest | str, **options: Any
    ) -> RecallResponse:
        """:meth:`recall` reranking with ``reranking`` instead of the settings' choice (None:
        no reranker): how feedback reads a recall's features, and how the benchmarks compare
        models on one store. ``request`` is a :class:`RecallRequest`, or a question with
        :meth:`recall`'s keywords as ``options``."""
        if isinstance(request, str):
            request = RecallRequest(request, **options)
        elif options:
            raise TypeError("recall_with takes a RecallRequest or a question with options")
        checked = check(request, self.settings)
        allowed = None
        if not checked.filters.is_empty():
            allowed = frozenset(self.store.allowed_keys(self.profile, checked.filters))
        response, runs = read(
            self.store,
            self.indexes,
            self.channels,
            checked.settings,
            self._questions.submit,
            profile=self.profile,
            text=checked.text,
            k=checked.k,
            now=checked.now,
            filters=checked.filters,
            allowed=allowed,
            hide_superseded=checked.hide_superseded,
            min_relevance=checked.min_relevance,
            want_trace=request.trace,
            reranking=reranking,
            reader=self.reader,
        )
        for run in runs:
            if run.error is not None:
                self._channel_errors[run.name] = run.error
            elif run.ran:
                self._channel_errors.pop(run.name, None)
        return response

    @property
    def location(self) -> str:
        """Where the store is: its file, or its server without the password."""
        return self.store.location

    def _store_health(self) -> dict[str, Any]:
        """The store's health and, when it answers, what its indexes hold."""
        health = self.store.health()
        if not health["healthy"]:
            return health
        reason = health.pop("reason")
        return {**health, **self.indexes.info(), "reason": reason}

    def health(self) -> dict[str, Any]:
        """Store, embedder and per-channel health, for startup checks and ``slm health``."""
        calibration = self.calibration
        counts = self.store.index_counts(self.profile)
        channels = {name: self.channel_health(name, counts) for name in self.channels}
        return {
            "profile": self.profile,
            "memories": counts["memories"],
            "store": self._store_health(),
            "embedder": self.embedder.health(),
            "channels": channels,
            "ranking": self.learning.describe(),
            "calibration": calibration.describe() if calibration else {"status": "uncalibrated"},
            "reader": self.reader.describe() if self.reader else None,
        }
