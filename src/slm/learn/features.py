"""What the reranker sees of each candidate: one row of numbers per memory in the window
(the top of the ranking before reranking), all of them things recall already computed.

Every feature is on a scale that does not depend on the store's size: reciprocal ranks,
shares of the window's best, evidence strengths (0..1), flags. A model standardises them
itself (``slm.learn.model``), so a feature may be unbounded (``length``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from slm.channels import ALL_CHANNELS, Context, Hit, registered
from slm.learn.reading import answer_type, asks, carries, focus, focus_terms, new_names
from slm.models import MemoryRecord

if TYPE_CHECKING:  # slm.recall imports this module
    from slm.recall.evidence import Evidence

#: The reranker reorders this many candidates at the top of the ranking; the rest keep
#: their order below them.
WINDOW = 50

#: The features after the channels' reciprocal ranks, in column order.
OWN_FEATURES: tuple[str, ...] = (
    "fused",  # fused RRF score / the window's best
    "position",  # 1 / position in the ranking before reranking
    "relevance",  # the contract's relevance_score
    "semantic",  # cosine similarity to the question
    "lexical",  # IDF-weighted share of the question's terms it contains
    "temporal",  # its time falls in the question's time window (0/1)
    "supported",  # admitted only as a neighbour of primary evidence (0/1)
    "entity_graph",  # entity, speaker and graph boosts, in units of 0.01
    "role",  # in the role the question asks about (0/1)
    "fact",  # states a value of the fact the question asks about (0/1)
    "recency",  # event time's place in the window: 1 newest, 0 oldest
    "length",  # log(1 + characters)
    "question",  # the memory itself ends in a question mark (0/1)
    "mentions",  # share of the question's entities it mentions
    "speaker",  # spoken by an entity the question names (0/1)
    "prev_relevance",  # relevance_score of the turn before it (0: not a candidate)
    "next_relevance",  # relevance_score of the turn after it
    "similar_relevance",  # best relevance_score among its semantic neighbours
    "marked_useful",  # log(1 + feedback calling it useful, for other recalls)
    "marked_not_useful",  # log(1 + feedback calling it not useful, for other recalls)
    "answer_type",  # holds the kind of value the question asks for (0/1, slm.learn.reading)
    "focus",  # share of the question's terms other than names that it contains
    "channels",  # share of the channels that found it
    "reply",  # the turn before it asks something (0/1, slm.learn.reading)
    "new_names",  # log(1 + names it mentions that the question does not)
    "replied_to",  # similarity to the question of the turn it replies to (another speaker's)
)


def feature_names(channels: Sequence[str] | None = None) -> tuple[str, ...]:
    """The feature names, in column order: 1 / rank in each channel (``rr_<name>``, 0
    where it did not find the memory) for ``channels`` (default: every registered channel
    now), then :data:`OWN_FEATURES`. A model file names the features it was trained on
    and reads its own columns by name (``slm.learn.model``), so a channel added later
    leaves it working."""
    return (*(f"rr_{name}" for name in (registered() if channels is None else channels)),
            *OWN_FEATURES)  # fmt: skip


#: The features of the channels slm ships.
FEATURES: tuple[str, ...] = feature_names(ALL_CHANNELS)


@dataclass(frozen=True, slots=True)
class Candidates:
    """The reranking window of one recall: memory keys in the order before reranking,
    their memory ids, and their feature rows (``len(keys) x len(features)``)."""

    keys: tuple[int, ...]
    ids: tuple[str, ...]
    matrix: np.ndarray
    #: the name of each column of ``matrix`` (:func:`feature_names`)
    features: tuple[str, ...] = FEATURES

    @classmethod
    def empty(cls, features: tuple[str, ...] = FEATURES) -> Candidates:
        return cls((), (), np.zeros((0, len(features))), features)


def read_features(window: Candidates | None, key: int) -> dict[str, float] | None:
    """The feature row of memory ``key`` by name, rounded, when ``window`` (the reranker's
    window of one recall) holds it; None otherwise."""
    if window is None or key not in window.keys:
        return None
    row = window.matrix[window.keys.index(key)]
    return {name: round(float(value), 6) for name, value in zip(window.features, row, strict=True)}


def window(ranking: Mapping[int, float], order: Sequence[int], hidden: frozenset[int]) -> list[int]:
    """The top :data:`WINDOW` of ``order`` (keys by descending ranking) that are shown."""
    return [key for key in order if key not in hidden and key in ranking][:WINDOW]


def turns_before(context: Context, keys: Sequence[int]) -> dict[int, int]:
    """The turn before each of ``keys`` (its ``prev`` edge), for those that have one: the
    recall reads them so that :func:`candidates` can tell a reply."""
    edges = context.graph.edges(keys)
    return {key: n for key in keys for n, kind, _ in edges.get(key, ()) if kind == "prev"}


def candidates(
    context: Context,
    keys: Sequence[int],
    rankings: Mapping[str, Sequence[Hit]],
    fused: Mapping[int, float],
    evidence: Mapping[int, Evidence],
    passed: Mapping[int, str],
    boosts: Mapping[int, float],
    roles: Mapping[int, float],
    facts: Mapping[int, float],
    records: Mapping[int, MemoryRecord],
    marks: Mapping[str, tuple[int, int]],
    before: Mapping[int, int],
) -> Candidates:
    """The feature rows of ``keys`` (the window, best first, each in ``records``);
    ``marks``: the profile's (useful, not useful) feedback counts by memory id; ``before``:
    the turn before each (:func:`turns_before`), read from ``records`` where it holds it."""
    channels = registered()
    names = feature_names(channels)
    rows = np.zeros((len(keys), len(names)), dtype=np.float64)
    if not keys:
        return Candidates.empty(names)
    column = {key: i for i, key in enumerate(keys)}
    for c, name in enumerate(channels):
        for hit in rankings.get(name, ()):
            row = column.get(hit.key)
            if row is not None:
                rows[row, c] = 1.0 / hit.rank
    base = len(channels)
    best = max(fused.get(key, 0.0) for key in keys) or 1.0
    times = sorted({records[key].event_time for key in keys})
    place = {moment: i for i, moment in enumerate(times)}
    spread = max(len(times) - 1, 1)
    groups = [frozenset(e for e, _ in m) for m in context.query.entity_ids.values()]
    mentioned = context.graph.mentions(keys) if groups else {}
    edges = context.graph.edges(keys)
    kind = answer_type(context.query.text)
    wanted = focus_terms(context.query.terms, context.query.entities)
    held = context.lexicon.matched(keys) if wanted else {}
    found_by = np.count_nonzero(rows[:, :base], axis=1) / max(base, 1)
    # A reply is to another speaker's turn (one's own turn before only goes on): only those
    # turns' similarity to the question is read.
    replies = {
        key: turn
        for key, turn in before.items()
        if turn in records and records[turn].source != records[key].source
    }
    similar = context.similarity(list(replies.values()))
    shown = [records[key] for key in keys]
    found = [evidence[key] for key in keys]
    contents = [record.content for record in shown]
    asked = [records.get(before.get(key, -1)) for key in keys]
    text = context.query.text
    # One column at a time, in OWN_FEATURES order (each value as a loop over rows would
    # compute it: the rows are the same to the last bit).
    columns: list[Sequence[float]] = [
        [fused.get(key, 0.0) / best for key in keys],
        [1.0 / (row + 1) for row in range(len(keys))],
        [e.relevance for e in found],
        [e.cosine for e in found],
        [e.lexical for e in found],
        [1.0 if e.temporal else 0.0 for e in found],
        [1.0 if passed.get(key) == "supported" else 0.0 for key in keys],
        [100.0 * boosts.get(key, 0.0) for key in keys],
        [1.0 if roles.get(key, 0.0) > 0 else 0.0 for key in keys],
        [1.0 if facts.get(key, 0.0) > 0 else 0.0 for key in keys],
        [place[record.event_time] / spread for record in shown],
        [math.log1p(len(content)) for content in contents],
        [1.0 if content.rstrip().endswith("?") else 0.0 for content in contents],
        *_entities(groups, [mentioned.get(key, ()) for key in keys]),
        *_neighbours([edges.get(key, ()) for key in keys], evidence),
        *zip(*(_marks(marks.get(record.id, (0, 0))) for record in shown), strict=True),
        [1.0 if carries(kind, content) else 0.0 for content in contents],
        [focus(wanted, held.get(key, set())) for key in keys],
        found_by.tolist(),
        [1.0 if turn is not None and asks(turn.content) else 0.0 for turn in asked],
        [math.log1p(new_names(text, content)) for content in contents],
        [similar[replies[key]] if key in replies else 0.0 for key in keys],
    ]
    rows[:, base:] = np.array(columns, dtype=np.float64).T
    return Candidates(tuple(keys), tuple(records[key].id for key in keys), rows, names)


def _entities(
    groups: Sequence[frozenset[int]], mentions: Sequence[Sequence[tuple[int, str, int, int]]]
) -> tuple[list[float], list[float]]:
    """For each memory's ``mentions``: the share of the question's entities (``groups``,
    each a set of entity ids) it mentions, and whether one of them speaks it (0/1)."""
    if not groups:
        return [0.0] * len(mentions), [0.0] * len(mentions)
    group_of: dict[int, list[int]] = {}
    for g, group in enumerate(groups):
        for entity in group:
            group_of.setdefault(entity, []).append(g)
    shares, spoken = [], []
    for mentioned in mentions:
        named: set[int] = set()
        said = False
        for entity, _, _, speaker in mentioned:
            found = group_of.get(entity)
            if found is not None:
                named.update(found)
                said = said or bool(speaker)
        shares.append(len(named) / len(groups))
        spoken.append(1.0 if said else 0.0)
    return shares, spoken


def _neighbours(
    edges: Sequence[Sequence[tuple[int, str, float]]], evidence: Mapping[int, Evidence]
) -> tuple[list[float], list[float], list[float]]:
    """For each memory's ``edges``: the best relevance of the turn before, the turn after
    and the semantic neighbours among the candidates (0 where none is one)."""
    columns: dict[str, list[float]] = {"prev": [], "next": [], "similar": []}
    for linked in edges:
        best = {"prev": 0.0, "next": 0.0, "similar": 0.0}
        for neighbour, kind, _ in linked:
            found = evidence.get(neighbour)
            if found is not None and kind in best and found.relevance > best[kind]:
                best[kind] = found.relevance
        for kind, value in best.items():
            columns[kind].append(value)
    return columns["prev"], columns["next"], columns["similar"]


def _marks(counts: tuple[int, int]) -> tuple[float, float]:
    return math.log1p(counts[0]), math.log1p(counts[1])
