"""A deterministic embedder for tests that are not about retrieval quality.

Each word (lower-cased) is hashed to a few signed coordinates, so texts that share words
have positive cosine similarity and identical texts identical vectors, on every machine.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from slm.embed.base import Matrix, normalise

_WORD = re.compile(r"\w+")


class FakeEmbedder:
    name = "fake-hash-384"
    dim = 384

    def embed_batch(self, texts: Sequence[str]) -> Matrix:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.casefold()):
                digest = hashlib.blake2b(word.encode("utf-8", "replace"), digest_size=8).digest()
                for i in range(0, 8, 2):
                    sign = 1.0 if digest[i + 1] & 1 else -1.0
                    out[row, (digest[i] * 7 + digest[i + 1]) % self.dim] += sign
            if not out[row].any():
                out[row, 0] = 1.0
        return normalise(out)

    def health(self) -> dict[str, object]:
        return {"name": self.name, "dim": self.dim, "healthy": True, "reason": None}
