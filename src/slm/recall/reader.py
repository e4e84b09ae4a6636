"""An optional reading stage: a cross-encoder of the user's own reads the question with each
of the leading results and reorders them by its score.

No such model ships with slm (none ships inside a package that installs offline), so this
stage runs only when one is named: ``Settings(reader="path/to/model.onnx")`` or
``SLM_READER``. The file is an ONNX export of a cross-encoder (for example with
``optimum-cli export onnx``) whose inputs are ``input_ids`` and ``attention_mask`` (and
``token_type_ids`` if it takes them) and whose first output holds one relevance logit per
pair (a last column of two is taken as the positive class). Its ``tokenizer.json`` lies
beside it (or name a folder holding ``model.onnx`` and ``tokenizer.json``).

The stage has a budget: it reads the top :attr:`Reader.top` results (default 20), each pair
cut to :attr:`Reader.pieces` word pieces (default 256). It changes ``ranking_score`` and the
order of those results only; ``relevance_score``, the evidence floor and abstention are
decided before it. The trace reports what it read and what it cost.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slm.errors import ModelError

#: Results read per recall, and word pieces per (question, memory) pair, by default.
TOP = 20
PIECES = 256


class Reader:
    """A cross-encoder in an ONNX file, with its tokenizer (see the module docstring)."""

    def __init__(self, path: str | Path, top: int = TOP, pieces: int = PIECES) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model = Path(path)
        if model.is_dir():
            model = model / "model.onnx"
        vocabulary = model.parent / "tokenizer.json"
        for needed in (model, vocabulary):
            if not needed.is_file():
                raise ModelError(f"reader: {needed} does not exist")
        if top < 1 or pieces < 8:
            raise ModelError("reader: top must be at least 1 and pieces at least 8")
        try:
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            self._session = ort.InferenceSession(
                str(model), options, providers=["CPUExecutionProvider"]
            )
            self._tokenizer = Tokenizer.from_file(str(vocabulary))
        except Exception as exc:  # onnxruntime and tokenizers raise their own kinds
            raise ModelError(f"reader: cannot load {model}: {exc}") from None
        self._inputs = [i.name for i in self._session.get_inputs()]
        unknown = set(self._inputs) - {"input_ids", "attention_mask", "token_type_ids"}
        if unknown or "input_ids" not in self._inputs:
            raise ModelError(
                f"reader: {model} takes {sorted(self._inputs)}; a cross-encoder takes "
                "input_ids, attention_mask and optionally token_type_ids"
            )
        self._tokenizer.enable_truncation(max_length=pieces)
        self._tokenizer.enable_padding()
        self.path, self.top, self.pieces = model, top, pieces
        self.vocabulary = vocabulary
        self._id: str | None = None

    @property
    def id(self) -> str:
        """``reader-`` and 12 hex digits of the SHA-256 of the model and tokenizer files:
        the same model anywhere has the same id, another model at the same path another
        (computed once, on first use: a calibration's fingerprint needs it)."""
        if self._id is None:
            digest = hashlib.sha256()
            for part in (self.path, self.vocabulary):
                with part.open("rb") as file:
                    for block in iter(lambda: file.read(1 << 20), b""):
                        digest.update(block)
            self._id = "reader-" + digest.hexdigest()[:12]
        return self._id

    def scores(self, question: str, texts: Sequence[str]) -> np.ndarray:
        """One score per text: how well it answers ``question``, higher is better."""
        if not texts:
            return np.zeros(0)
        encoded = self._tokenizer.encode_batch([(question, text) for text in texts])
        arrays: dict[str, Any] = {
            "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
        }
        output = self._session.run(None, {name: arrays[name] for name in self._inputs})[0]
        return np.asarray(output, dtype=np.float64).reshape(len(texts), -1)[:, -1]

    def read(self, question: str, texts: Sequence[str]) -> tuple[np.ndarray, float]:
        """:meth:`scores`, and what they cost in milliseconds."""
        started = time.perf_counter()
        scores = self.scores(question, texts)
        return scores, (time.perf_counter() - started) * 1000

    def describe(self) -> dict[str, Any]:
        return {"model": str(self.path), "top": self.top, "pieces": self.pieces}
