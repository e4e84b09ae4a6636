"""Settings: resolved once at the edge (arguments, then environment) into one frozen object.

Deep modules receive a :class:`Settings`; only :meth:`Settings.from_env`, :func:`data_dir`
and the paths derived from it look at the environment, and only when the caller asks them to.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from slm.embed import EMBEDDERS
from slm.errors import ConfigError
from slm.models import SCOPE_KEYS

#: What a probable update found at write time does (``Settings.update_policy``).
UPDATE_POLICIES = ("suggest", "auto")


@dataclass(frozen=True, slots=True)
class Settings:
    """Every tunable of slm, with its documented default.

    Attributes:
        channels: channels allowed to run (a channel must also be healthy to run); None
            (the default) allows every registered channel (``slm.channels.REGISTRY``).
        required_channels: channels that must be healthy when a ``Memory`` opens, or it raises.
        weights: per-channel weight ``w_c`` in ``sum_c w_c / (rrf_k + rank_c)`` for the
            channels it names; the others keep their own default (the channel class's
            ``weight``). Channel names are checked when a ``Memory`` opens.
        rrf_k: the reciprocal-rank-fusion constant ``k`` (30: measured on LoCoMo dev, where it
            beat Cormack et al.'s 60 by favouring agreement at the top of the lists).
        candidates_per_channel: how many ranked hits each channel contributes to fusion.
        embedder: a name in ``slm.embed.EMBEDDERS``: ``"minilm"`` (all-MiniLM-L6-v2, int8 ONNX)
            or ``"fake"`` (hashing, for tests).
        semantic_floor: how far a memory's cosine similarity to the query must rise above the
            query's mean similarity to the rest of the profile to count as semantic evidence.
        lexical_floor: IDF-weighted share of the query's terms a memory must contain to have
            lexical evidence (0..1).
        relevance_cos_low, relevance_cos_high: cosine similarities mapped to relevance 0 and 1.
        bm25_k1, bm25_b: BM25 term-frequency saturation and length normalisation.
        trust_prior: ``(alpha, beta)`` of the Beta prior on a source's reliability.
        legacy_aliases: also emit ``score`` and ``confidence`` in results (contract v2 aliases).
        entity_boost: post-fusion boost for sharing all of the query's entities.
        graph_boost: post-fusion boost for being linked to one of the top 3 fused candidates.
        speaker_boost: post-fusion boost for being spoken by an entity the query names (the
            memory reads ``"Name: ..."`` and the question asks about Name), times the
            memory's ``relevance_score``.
        role_boost: post-fusion boost, times the memory's ``relevance_score``, for being
            in the role a question asks about, in a conversation between a user and an
            assistant (see ``slm.ingest.roles``).
        fact_boost: post-fusion boost for stating a value of the fact a question asks
            about ("Where does Ana live?": a memory that says where Ana lives; see
            ``slm.ingest.asked``).
        evidence_weight: weight of ``relevance_score`` added to the fused score when ranking.
        update_policy: what a probable update found at write time does (docs/lifecycle.md):
            ``"suggest"`` (the default) links it to the memory it updates, reported in the
            ``remember`` result and as ``possibly_superseded_by`` in recall; ``"auto"``
            also supersedes the older memory.
        rerank: reorder the top of each recall with a learned ranking model
            (docs/learning.md); it changes ``ranking_score`` and order only.
        rerank_model: a ranking model file to use instead of the one that ships with slm
            (``slm bench learning --train-default --out FILE`` writes one).
        learning: with ``rerank``, let a profile's own feedback train its ranker (it takes
            over from the shipped model only after enough feedback and a shadow test).
        reader: an ONNX cross-encoder of your own (a file, or a folder with ``model.onnx``;
            its ``tokenizer.json`` beside it) that reads the question with each of the
            top ``reader_top`` results, cut to ``reader_pieces`` word pieces, and reorders
            them (``slm.recall.reader``, docs/reading.md); ranking_score and order only.
        scope_keys: the metadata keys that say who a memory belongs to within a profile
            (docs/scopes.md): the same text under two scopes is two memories, and nothing
            links memories of different scopes. A key ending in ``*`` names every key
            starting with the rest. ``()`` makes a profile one scope.
        calibration: a calibration artefact file (``slm calibrate``; docs/calibration.md).
            When it passed the release gate and was fitted for this release and
            retrieval configuration, recalls of its ``k`` report ``answer_confidence``;
            any other artefact is refused when the ``Memory`` opens.
    """

    channels: tuple[str, ...] | None = None
    required_channels: tuple[str, ...] = ()
    weights: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    rrf_k: float = 30.0
    candidates_per_channel: int = 50
    embedder: str = "minilm"
    semantic_floor: float = 0.25
    lexical_floor: float = 0.5
    relevance_cos_low: float = 0.15
    relevance_cos_high: float = 0.75
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    trust_prior: tuple[float, float] = (3.0, 1.0)
    legacy_aliases: bool = True
    entity_boost: float = 0.005
    evidence_weight: float = 0.03
    graph_boost: float = 0.01
    speaker_boost: float = 0.05
    role_boost: float = 0.03
    fact_boost: float = 0.03
    update_policy: str = "suggest"
    scope_keys: tuple[str, ...] = SCOPE_KEYS
    rerank: bool = True
    rerank_model: str | None = None
    learning: bool = True
    calibration: str | None = None
    reader: str | None = None
    reader_top: int = 20
    reader_pieces: int = 256

    def __post_init__(self) -> None:
        if self.embedder not in EMBEDDERS:
            raise ConfigError(f"unknown embedder {self.embedder!r}; known: {', '.join(EMBEDDERS)}")
        if self.rrf_k <= 0:
            raise ConfigError("rrf_k must be positive")
        if not 1 <= self.candidates_per_channel <= 10_000:
            raise ConfigError("candidates_per_channel must be in 1..10000")
        if not self.relevance_cos_low < self.relevance_cos_high:
            raise ConfigError("relevance_cos_low must be below relevance_cos_high")
        if min(self.trust_prior) <= 0:
            raise ConfigError("trust_prior parameters must be positive")
        if not 1 <= self.reader_top <= 200 or not 8 <= self.reader_pieces <= 4096:
            raise ConfigError("reader_top must be in 1..200 and reader_pieces in 8..4096")
        object.__setattr__(self, "scope_keys", tuple(self.scope_keys))
        if any(not key.strip() or key == "*" for key in self.scope_keys):
            raise ConfigError("scope_keys must be metadata keys (a key may end in '*')")
        if self.update_policy not in UPDATE_POLICIES:
            raise ConfigError(
                f"unknown update policy {self.update_policy!r}; known: {', '.join(UPDATE_POLICIES)}"
            )

    def with_channels(self, channels: tuple[str, ...]) -> Settings:
        return replace(self, channels=channels)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``SLM_*`` environment variables, then explicit overrides.

        ``SLM_CHANNELS`` and ``SLM_REQUIRED_CHANNELS`` are comma-separated channel names,
        ``SLM_EMBEDDER`` names the embedder, ``SLM_RRF_K`` is a number,
        ``SLM_LEGACY_ALIASES``, ``SLM_RERANK`` and ``SLM_LEARNING`` are booleans (1/0,
        true/false, yes/no, on/off), ``SLM_RERANK_MODEL`` is a model file,
        ``SLM_CALIBRATION`` a calibration artefact, ``SLM_READER`` a cross-encoder
        (``SLM_READER_TOP`` and ``SLM_READER_PIECES`` whole numbers) and
        ``SLM_UPDATE_POLICY`` is ``suggest`` or ``auto``, ``SLM_SCOPE_KEYS`` comma-separated
        metadata keys (empty: no scopes).
        """
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        if "SLM_CHANNELS" in env:
            values["channels"] = channel_list(env["SLM_CHANNELS"], "SLM_CHANNELS")
        if "SLM_REQUIRED_CHANNELS" in env:
            values["required_channels"] = channel_list(
                env["SLM_REQUIRED_CHANNELS"], "SLM_REQUIRED_CHANNELS", allow_empty=True
            )
        if "SLM_EMBEDDER" in env:
            values["embedder"] = env["SLM_EMBEDDER"].strip()
        if "SLM_RRF_K" in env:
            try:
                values["rrf_k"] = float(env["SLM_RRF_K"])
            except ValueError:
                raise ConfigError(f"SLM_RRF_K is not a number: {env['SLM_RRF_K']!r}") from None
        if "SLM_LEGACY_ALIASES" in env:
            values["legacy_aliases"] = parse_bool(env["SLM_LEGACY_ALIASES"], "SLM_LEGACY_ALIASES")
        for name in ("rerank", "learning"):
            variable = f"SLM_{name.upper()}"
            if variable in env:
                values[name] = parse_bool(env[variable], variable)
        for name in ("rerank_model", "calibration", "reader"):
            variable = f"SLM_{name.upper()}"
            if env.get(variable, "").strip():
                values[name] = env[variable].strip()
        for name in ("reader_top", "reader_pieces"):
            variable = f"SLM_{name.upper()}"
            if variable in env:
                try:
                    values[name] = int(env[variable])
                except ValueError:
                    raise ConfigError(f"{variable} is not a whole number") from None
        if "SLM_SCOPE_KEYS" in env:
            values["scope_keys"] = tuple(
                dict.fromkeys(k.strip() for k in env["SLM_SCOPE_KEYS"].split(",") if k.strip())
            )
        if "SLM_UPDATE_POLICY" in env:
            values["update_policy"] = env["SLM_UPDATE_POLICY"].strip().lower()
        values.update(overrides)
        return cls(**values)


def channel_list(text: str, what: str, *, allow_empty: bool = False) -> tuple[str, ...]:
    """Channel names from comma-separated ``text`` (whether they exist is checked when a
    ``Memory`` opens, against the channel registry)."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names and not allow_empty:
        raise ConfigError(f"{what} names no channel")
    return names


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def parse_bool(text: str, what: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{what} must be a boolean (1/0, true/false, yes/no, on/off), not {text!r}")


def data_dir(env: Mapping[str, str] | None = None) -> Path:
    """``SLM_HOME`` if set, else the platform's user data directory for slm."""
    env = os.environ if env is None else env
    if env.get("SLM_HOME"):
        return Path(env["SLM_HOME"]).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("slm", appauthor=False))


def index_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """Where a server of a PostgreSQL store saves its indexes (docs/postgres.md):
    ``SLM_INDEX_DIR`` if set (empty: nowhere, rebuilt from the rows by every server that
    starts), else ``indexes`` in :func:`data_dir`."""
    env = os.environ if env is None else env
    if "SLM_INDEX_DIR" in env:
        text = env["SLM_INDEX_DIR"].strip()
        return Path(text).expanduser() if text else None
    return data_dir(env) / "indexes"


def default_db_path(env: Mapping[str, str] | None = None) -> Path:
    """``SLM_DB`` if set, else ``memory.db`` in :func:`data_dir`."""
    env = os.environ if env is None else env
    if env.get("SLM_DB"):
        return Path(env["SLM_DB"]).expanduser()
    return data_dir(env) / "memory.db"
