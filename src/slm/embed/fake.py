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
#: Words per passage, and words shared by consecutive passages.
PASSAGE_WORDS = 200
OVERLAP_WORDS = 50


class FakeEmbedder:
    name = "fake-hash-384"
    dim = 384
    window = PASSAGE_WORDS

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

    def embed_passages(self, texts: Sequence[str], limit: int) -> list[Matrix]:
        """Passages of :data:`PASSAGE_WORDS` words (the first one is the whole text, as
        :meth:`embed_batch` embeds it)."""
        out = []
        step = PASSAGE_WORDS - OVERLAP_WORDS
        for text in texts:
            words = text.split()
            rest = [
                " ".join(words[start : start + PASSAGE_WORDS])
                for start in range(step, max(len(words) - OVERLAP_WORDS, 0), step)
            ]
            out.append(self.embed_batch([text, *rest][: max(limit, 1)]))
        return out

    def health(self) -> dict[str, object]:
        return {"name": self.name, "dim": self.dim, "healthy": True, "reason": None}
