"""Labelled recalls: what ``slm calibrate`` fits on (docs/calibration.md).

A labels file is JSON Lines, one question per line::

    {"query": "Where does Ana live?", "evidence": ["<memory id>", ...],
     "profile": "default", "group": "conv-26", "now": "2023-05-08T13:56:00+00:00"}

``evidence`` lists the stored memories that hold the answer; an empty list says the store
holds no answer. ``profile`` (default: the command's profile) is where the memories are;
``group`` (default: the profile) is the unit the fit and held-out parts are split by, a
conversation or a corpus; ``origin`` names the group a question was written for when it is
asked of another group's store (the report counts those asked across the split); ``now``
anchors relative time in the question. ``id`` and
``kind`` may be given for the reader's sake. Each label is asked as a recall of the given
``k``, and the recall's signals are kept with whether its results held any evidence.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slm import validate
from slm.calibrate.artefact import BINS, Calibration
from slm.engine import Memory
from slm.errors import CalibrationError, InvalidInput
from slm.learn.rerank import Reranking
from slm.models import RecallRequest
from slm_fit import metrics
from slm_fit.calibration import RISKS, Observation, arrays

#: The most labelled recalls one calibration reads.
MAX_LABELS = 100_000
KEYS = frozenset({"query", "evidence", "profile", "group", "origin", "now", "id", "kind"})


@dataclass(frozen=True, slots=True)
class Label:
    query: str
    evidence: frozenset[str]
    profile: str
    group: str
    now: str | None
    #: where it was read: ``file:line``
    where: str
    #: the group the question was written for, when another than ``group``
    origin: str | None = None


def read_labels(paths: Sequence[str | Path], profile: str) -> tuple[list[Label], str]:
    """The labels in ``paths`` (JSON Lines; ``profile`` for lines that name none), and the
    SHA-256 of the files' bytes in order. A line that is not a label is refused with
    its place and what is wrong."""
    labels: list[Label] = []
    digest = hashlib.sha256()
    for path in paths:
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise InvalidInput(f"cannot read labels {path}: {exc}", field="labels") from None
        digest.update(raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{path} is not UTF-8: {exc}", field="labels") from None
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                labels.append(_label(line, profile, f"{path}:{number}"))
                if len(labels) > MAX_LABELS:
                    raise InvalidInput(f"more than {MAX_LABELS} labels; split them", field="labels")
    if not labels:
        raise InvalidInput("the labels files hold no label", field="labels")
    return labels, digest.hexdigest()


def _label(line: str, profile: str, where: str) -> Label:
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{where}: not JSON: {exc}", field="labels") from None
    if not isinstance(item, dict):
        raise InvalidInput(f"{where}: a label is a JSON object", field="labels")
    unknown = sorted(set(item) - KEYS)
    if unknown:
        raise InvalidInput(
            f"{where}: unknown key(s) {', '.join(unknown)}; a label has " + ", ".join(sorted(KEYS)),
            field="labels",
        )
    evidence = item.get("evidence")
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise InvalidInput(
            f"{where}: 'evidence' must be a list of memory ids ([] when the store holds no answer)",
            field="labels",
        )
    try:
        query = validate.query(item.get("query"))
        owner = validate.profile(item.get("profile", profile))
        now = item.get("now")
        if now is not None:
            validate.timestamp(now, "now")
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}", field="labels") from None
    for memory_id in evidence:
        try:
            validate.memory_id(memory_id, "evidence")
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {exc}", field="labels") from None
    group = item.get("group", owner)
    origin = item.get("origin")
    for name, value in (("group", group), ("origin", origin)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InvalidInput(f"{where}: '{name}' must be a non-empty string", field="labels")
    return Label(query, frozenset(evidence), owner, group, now, where, origin)


def observe(
    labels: Sequence[Label],
    open_memory: Callable[[str], AbstractContextManager[Memory]],
    k: int,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[Observation], dict[str, object]]:
    """Ask every label as a recall of ``k`` in its profile (``open_memory(profile)``), and
    return each recall's signals and outcome with the configuration's fingerprint. Every
    evidence id must be a memory of the label's profile. The recalls run as recall does,
    with the configured ranker and without a calibration, and are not logged."""
    k = validate.k(k)
    observations: list[Observation] = []
    running: dict[str, object] | None = None
    for profile, items in _by_profile(labels):
        with open_memory(profile) as memory:
            if memory.count() == 0:
                raise InvalidInput(
                    f"profile {profile!r} holds no memories in this store ({items[0].where})",
                    field="labels",
                )
            _check_ids(memory, items)
            fingerprint = memory.fingerprint()
            if running is not None and fingerprint != running:
                raise CalibrationError("the profiles' stores run different configurations")
            running = fingerprint
            base = memory.learning.base
            reranking = Reranking(base, base.id, memory.learning.base_origin) if base else None
            for label in items:
                request = RecallRequest(label.query, k=k, now=label.now)
                response = memory.recall_with(reranking, request)
                assert response.signals is not None
                hit = bool(label.evidence & set(response.ids))
                observations.append(
                    Observation(
                        label.group,
                        response.signals.values,
                        hit,
                        answerable=bool(label.evidence),
                        origin=label.origin,
                    )
                )
        if progress:
            progress(f"{profile}: {len(items)} labelled recalls")
    assert running is not None
    return observations, running


def _by_profile(labels: Sequence[Label]) -> Iterator[tuple[str, list[Label]]]:
    grouped: dict[str, list[Label]] = {}
    for label in labels:
        grouped.setdefault(label.profile, []).append(label)
    yield from grouped.items()


def _check_ids(memory: Memory, labels: Sequence[Label]) -> None:
    wanted = sorted({e for label in labels for e in label.evidence})
    known: set[str] = set()
    for start in range(0, len(wanted), validate.MAX_IDS_PER_CALL):
        chunk = wanted[start : start + validate.MAX_IDS_PER_CALL]
        known.update(record.id for record in memory.get_many(chunk))
    for label in labels:
        missing = sorted(label.evidence - known)
        if missing:
            raise InvalidInput(
                f"{label.where}: evidence id(s) {', '.join(missing[:3])} are not memories of "
                f"profile {label.profile!r}",
                field="labels",
            )


def distribution(
    labels: Sequence[Label], paths: Sequence[str | Path], digest: str, corpus: str, queries: str
) -> dict[str, Any]:
    """The declared corpus and query distribution of a calibration: the caller's words, and
    what the labels are (files, their hash, counts, profiles and groups)."""
    return {
        "corpus": corpus,
        "queries": queries,
        "labels": {
            "files": [Path(p).name for p in paths],
            "sha256": digest,
            "count": len(labels),
            "without_answer": sum(1 for label in labels if not label.evidence),
            "profiles": sorted({label.profile for label in labels}),
            "groups": sorted({label.group for label in labels}),
        },
    }


def evaluate(
    calibration: Calibration, observations: Sequence[Observation]
) -> tuple[dict[str, Any], tuple[np.ndarray, np.ndarray]]:
    """An artefact's figures on labelled recalls it was not fitted on (all of them held
    out), with what its selective-risk threshold gives there."""
    matrix, y = arrays(observations)
    p = calibration.model.probability(matrix)
    report = metrics.summary(p, y, BINS, RISKS)
    if calibration.threshold is not None:
        _, coverage, risk = metrics.answered(p, y, calibration.threshold)
        report["abstention"] = {
            "max_risk": calibration.max_risk,
            "threshold": calibration.threshold,
            "coverage": round(coverage, 4),
            "risk": None if risk is None else round(risk, 4),
        }
    return {"calibration_id": calibration.id, **report}, (p, y)
