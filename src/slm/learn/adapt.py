"""A profile's learning from use: which ranker its recalls use, the recall log behind each
``query_id``, and refits of its own model from its feedback, with guard rails:

- cold start: the shipped model (or ``Settings.rerank_model``) ranks until the profile has
  :data:`MIN_QUERIES` recalls with a useful result named by feedback;
- the profile's model is fitted toward the shipped one (``slm.learn.model.fit`` with a
  prior), so a little feedback moves it a little;
- shadow test: a refit is used only if, cross-validated on the profile's own feedback, it
  ranks the useful memories higher than the shipped model does (mean reciprocal rank up by
  at least :data:`MIN_GAIN`); otherwise the shipped model ranks;
- ``reset`` forgets the feedback, the log and the learned model in one step.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import uuid
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import numpy as np

from slm.contract import RecallResponse
from slm.errors import ModelError, NotFound, SlmError
from slm.learn.features import Candidates, feature_names
from slm.learn.logwriter import LogWriter
from slm.learn.model import Example, Ranker, default_ranker, fit, order
from slm.learn.rerank import Reranking
from slm.models import RecallRequest
from slm.settings import Settings
from slm.store import Store
from slm.store.base import FeedbackEvent, LoggedRecall

log = logging.getLogger("slm")

#: Labelled recalls (feedback named a useful memory of them) before a profile's own model
#: can take over from the shipped one.
MIN_QUERIES = 20
#: A refit happens after this many newly labelled recalls.
REFIT_EVERY = 10
#: The newest labelled recalls a refit learns from.
MAX_TRAINING = 1000
#: Pull of a profile's model toward the shipped one (``fit``'s ``l2``).
PRIOR_PULL = 20.0
#: Folds of the shadow test, how much better a refit must rank the useful memories (mean
#: reciprocal rank), and how sure the test must be that it does (the gain over its
#: standard error: 2 is about 98% one-sided).
SHADOW_FOLDS = 5
MIN_GAIN = 0.01
MIN_SURE = 2.0
#: Seconds a recall trusts its cached view of the profile's model (another process may
#: have refitted it).
MODEL_TTL = 5.0

#: ``Memory.recall_with``: a recall with a given reranking.
Recall = Callable[[Reranking | None, RecallRequest], RecallResponse]


def _meta_key(profile: str) -> str:
    return f"ranker:{profile}"


@dataclass(frozen=True, slots=True)
class LearnedState:
    """What the store keeps of a profile's learning: the model in use (None: the shipped
    one) and the last refit's numbers."""

    model: Ranker | None
    report: Mapping[str, Any]


class Learning:
    """The reranker and learning of one profile of an open ``Memory``."""

    def __init__(self, store: Store, profile: str, settings: Settings, recall: Recall) -> None:
        self.store, self.profile, self.settings, self._recall = store, profile, settings, recall
        self.base: Ranker | None = None
        self.base_origin = "default"
        if settings.rerank:
            if settings.rerank_model:
                self.base, self.base_origin = Ranker.load(settings.rerank_model), "file"
            else:
                self.base = default_ranker()
        self._state: LearnedState | None = None
        self._read_at = -MODEL_TTL
        self.error: str | None = None
        self._writer = LogWriter(partial(_write_log, store, profile))

    @property
    def active(self) -> bool:
        """Whether feedback trains this profile's ranker."""
        return self.settings.rerank and self.settings.learning

    # -- reading the model ---------------------------------------------------------------

    def state(self) -> LearnedState:
        """The profile's learned state, re-read from the store at most every MODEL_TTL s."""
        now = time.monotonic()
        if self._state is None or now - self._read_at >= MODEL_TTL:
            self._state = self._load()
            self._read_at = now
        return self._state

    def _load(self) -> LearnedState:
        text = self.store.meta(_meta_key(self.profile))
        if not text:
            return LearnedState(None, {})
        try:
            data = json.loads(text)
            model = data.get("model")
            ranker = Ranker.from_data(model, "learned model") if model else None
            self.error = None
            return LearnedState(ranker, data.get("report", {}))
        except (ValueError, AttributeError, ModelError) as exc:
            # A damaged learned model never stops recall: the shipped model ranks.
            self.error = f"the profile's learned model is unusable ({exc}); using the base model"
            log.warning("slm: %s", self.error)
            return LearnedState(None, {})

    def reranking(self) -> Reranking | None:
        """How this profile's recalls rerank now (None: the reranker is off)."""
        if self.base is None:
            return None
        if self.settings.learning:
            learned = self.state().model
            if learned is not None:
                return Reranking(learned, learned.id, "profile")
        return Reranking(self.base, self.base.id, self.base_origin)

    def describe(self) -> dict[str, Any]:
        """For health and settings: whether reranking and learning are on, which model."""
        rerank = self.reranking()
        out: dict[str, Any] = {
            "rerank": self.settings.rerank,
            "learning": self.active,
            "model": rerank.model_id if rerank else None,
            "origin": rerank.origin if rerank else None,
            "base_model": self.base.id if self.base else None,
        }
        if self.active:
            out["last_refit"] = dict(self.state().report) or None
            out["min_queries"] = MIN_QUERIES
        if self.error:
            out["error"] = self.error
        return out

    # -- the recall log ------------------------------------------------------------------

    def logged(self, response: RecallResponse, request: RecallRequest) -> RecallResponse:
        """``response`` with a ``query_id``, the request and its results kept under it.

        The log is written by a thread of its own when recalls pause (slm/learn/logwriter.py),
        so that a recall never waits for a write (:meth:`flush` waits for it); a store that
        cannot keep it costs feedback on this recall, not the recall."""
        query_id = uuid.uuid4().hex
        now = datetime.now(UTC)
        try:
            kept = request.to_log()
            # The moment the recall read relative times against, as near as it matters.
            kept["now"] = kept["now"] or kept["as_of"] or now.isoformat()
            kept["query"] = response.query
            entry = LoggedRecall(
                query_id,
                int(now.timestamp() * 1_000_000),
                json.dumps(kept),
                json.dumps(response.ids),
            )
            self._writer.submit(entry)
        except (TypeError, ValueError, RuntimeError) as exc:
            log.warning("slm: recall not logged, feedback cannot name it: %s", exc)
        return replace(response, query_id=query_id)

    def flush(self) -> None:
        """Wait until every recall logged so far is written."""
        self._writer.flush()

    def close(self) -> None:
        """Write what is pending and stop the log's thread."""
        self._writer.close()

    def logged_recall(self, query_id: str) -> LoggedRecall:
        """The logged recall ``query_id`` names; :class:`NotFound` when the profile has none."""
        self.flush()  # it may have been logged a moment ago
        entry = self.store.feedback.logged(self.profile, [query_id]).get(query_id)
        if entry is None:
            raise NotFound(
                f"no recall with query id {query_id} in profile {self.profile!r} (query ids "
                "are kept for the newest recalls and those feedback names; docs/learning.md)"
            )
        return entry

    def _rerun(self, entry: LoggedRecall) -> Candidates:
        """A logged recall again, without reranking: its window. Feedback given after it
        (its own labels included) is left out of the window's features."""
        request = RecallRequest.from_log(json.loads(entry.request))
        return read_window(self._recall, request, entry.created_at)

    # -- feedback ------------------------------------------------------------------------

    def after_feedback(
        self, event: FeedbackEvent, entry: LoggedRecall | None
    ) -> dict[str, Any] | None:
        """Refit when learning is on and enough new labelled recalls arrived; the refit's
        report, or None when none ran. Only a recall's first useful label can add one, so
        a flood of feedback on known recalls costs no refits. ``entry``: the logged recall
        the event names, as read before the event was stored."""
        if not self.active or self.base is None or not event.useful:
            return None
        if entry is None or entry.example is not None:
            return None
        self._keep(entry)
        labelled, labels = self.labels()
        done = int(self._load().report.get("labelled", 0))
        if labelled < MIN_QUERIES or labelled - done < REFIT_EVERY:
            return None
        return self.refit(labels, labelled)

    def _keep(self, entry: LoggedRecall) -> tuple[np.ndarray, list[str]]:
        """A logged recall's window, read again and kept with it. A request that cannot run
        any more (a channel since removed, say) keeps an empty window: it is skipped."""
        try:
            window = self._rerun(entry)
            kept = (window.matrix, list(window.ids))
        except (SlmError, TypeError, ValueError) as exc:
            log.warning("slm: recall %s cannot be read again: %s", entry.query_id, exc)
            kept = (np.zeros((0, len(feature_names()))), [])
        self.store.feedback.keep_example(self.profile, entry.query_id, _encode(*kept))
        return kept

    def labels(self) -> tuple[int, dict[str, dict[str, int]]]:
        """How many recalls have a useful memory, and query_id -> memory id -> label (the
        latest event wins) for the newest :data:`MAX_TRAINING` of them."""
        events = self.store.feedback.events(self.profile, 100_000, labelled_only=True)
        by_query: dict[str, dict[str, int]] = {}
        for event in events:  # newest first
            assert event.query_id is not None
            labels = by_query.setdefault(event.query_id, {})
            labels.setdefault(event.memory_id, 1 if event.useful else 0)
        useful = {q: ls for q, ls in by_query.items() if any(ls.values())}
        return len(useful), dict(list(useful.items())[:MAX_TRAINING])

    def examples(self, labels: Mapping[str, Mapping[str, int]]) -> list[Example]:
        """The labelled recalls as training examples (each window read once, then kept)."""
        logged = self.store.feedback.logged(self.profile, list(labels))
        out = []
        for query_id, marks in labels.items():
            entry = logged.get(query_id)
            if entry is None:
                continue
            kept = _decode(entry.example) if entry.example else None
            matrix, ids = kept if kept is not None else self._keep(entry)
            if len(ids):
                out.append(Example(matrix, tuple(marks.get(i) for i in ids)))
        return out

    def refit(self, labels: Mapping[str, Mapping[str, int]], labelled: int) -> dict[str, Any]:
        """Fit a profile model on the labelled recalls and keep it if it passes the shadow
        test (:func:`learn`); ``labelled``: how many recalls had a useful memory in all.
        Returns the report kept with it."""
        assert self.base is not None
        model, report = learn(self.examples(labels), self.base)
        report = {
            **report,
            "queries": len(labels),
            "labelled": labelled,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        kept = {"model": model.to_data() if model else None, "report": report}
        self.store.set_meta(_meta_key(self.profile), json.dumps(kept))
        self._state = None
        return report

    def reset(self) -> int:
        """Forget the profile's feedback, recall log and learned model; the number of
        feedback events forgotten."""
        count = self.store.feedback.reset(self.profile)
        self.store.set_meta(_meta_key(self.profile), "")
        self._state = None
        return count


def read_window(
    recall: Recall, request: RecallRequest, marks_before: int | None = None
) -> Candidates:
    """The window of one recall (``recall``: ``Memory.recall_with``) before reranking, with
    feedback given before ``marks_before`` among its features; empty when nothing passed
    the evidence floor."""
    seen: list[Candidates] = []
    reranking = Reranking(None, observe=seen.append, marks_before=marks_before)
    recall(reranking, replace(request, trace=False))
    return seen[0] if seen else Candidates.empty()


def learn(examples: Sequence[Example], base: Ranker) -> tuple[Ranker | None, dict[str, Any]]:
    """A profile model from its labelled recalls, or None when the base model should keep
    ranking: too few recalls with a useful memory, or a shadow test the model fails."""
    usable = [e for e in examples if any(label == 1 for label in e.labels)]
    base_rr, learned_rr = shadow(usable, base)
    gains = learned_rr - base_rr
    gain = float(gains.mean()) if len(gains) else 0.0
    error = float(gains.std(ddof=1) / np.sqrt(len(gains))) if len(gains) > 1 else 0.0
    sure = gain / error if error > 0 else 0.0
    passed = len(usable) >= MIN_QUERIES and gain >= MIN_GAIN and sure >= MIN_SURE
    model = _profile_model(usable, base) if passed else None
    return model, {
        "examples": len(usable),
        "shadow_mrr_base": round(float(base_rr.mean()), 4) if len(base_rr) else None,
        "shadow_mrr_learned": round(float(learned_rr.mean()), 4) if len(learned_rr) else None,
        "shadow_gain_over_error": round(sure, 2),
        "adopted": passed,
        "model": model.id if model else None,
    }


def _profile_model(examples: Sequence[Example], base: Ranker) -> Ranker:
    """A profile's model: fitted toward ``base`` on its own recalls. It reranks every window
    of the profile (no ``shift_limit``): the shadow test on the profile's own recalls is its
    check of fitting this kind of store, where the base model may not apply."""
    model = fit(examples, l2=PRIOR_PULL, prior=base, trained_on="profile feedback")
    return dataclasses.replace(model, shift_limit=None)


def shadow(examples: Sequence[Example], base: Ranker) -> tuple[np.ndarray, np.ndarray]:
    """Reciprocal rank of the first useful row of each example under ``base`` and under a
    profile model fitted on the other folds (cross-validation over ``examples``)."""
    if len(examples) < SHADOW_FOLDS:
        return np.zeros(0), np.zeros(0)
    base_rr: list[float] = []
    learned_rr: list[float] = []
    for fold in range(SHADOW_FOLDS):
        test = examples[fold::SHADOW_FOLDS]
        train = [e for i, e in enumerate(examples) if i % SHADOW_FOLDS != fold]
        model = _profile_model(train, base)
        base_rr.extend(_reciprocal_rank(base, e) for e in test)
        learned_rr.extend(_reciprocal_rank(model, e) for e in test)
    return np.array(base_rr), np.array(learned_rr)


def _reciprocal_rank(ranker: Ranker, example: Example) -> float:
    for position, row in enumerate(order(ranker, example), start=1):
        if example.labels[row] == 1:
            return 1.0 / position
    return 0.0


def _encode(matrix: np.ndarray, ids: Sequence[str]) -> bytes:
    rows = matrix.round(6).tolist()
    payload = {"features": list(feature_names()), "ids": list(ids), "rows": rows}
    return zlib.compress(json.dumps(payload).encode("utf-8"))


def _decode(blob: bytes) -> tuple[np.ndarray, list[str]] | None:
    """A kept window, or None when it was computed for other features (read it again)."""
    try:
        payload = json.loads(zlib.decompress(blob))
    except (zlib.error, ValueError):
        return None
    names = feature_names()
    if payload.get("features") != list(names):
        return None
    rows = np.asarray(payload["rows"], dtype=np.float64).reshape(-1, len(names))
    return rows, [str(i) for i in payload["ids"]]


def feedback_event(memory_id: str, useful: bool, query_id: str | None) -> FeedbackEvent:
    return FeedbackEvent(memory_id, useful, query_id, time.time_ns() // 1000)


def _write_log(store: Store, profile: str, entries: Sequence[LoggedRecall]) -> None:
    """The recall log's writer: of the store and profile only (slm/learn/logwriter.py)."""
    try:
        store.feedback.log(profile, entries)
    except SlmError as exc:
        log.warning("slm: %d recalls not logged, feedback cannot name them: %s", len(entries), exc)
