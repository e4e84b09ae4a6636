"""Secrets masked out of captured text before it is stored, by the common patterns: provider
keys and tokens by their shapes (OpenAI and Anthropic ``sk-``, AWS ``AKIA``, GitHub
``ghp_``/``github_pat_``, Slack ``xox?-``, Google ``AIza``, JWTs, PEM private keys), a
password in a URL, ``Bearer`` credentials, and the value given to a name that says it is
secret (``password=...``, ``API_KEY: ...``, ``"token": "..."``)."""

from __future__ import annotations

import re

#: What a masked secret reads as.
MASK = "[secret masked]"

_SHAPES = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)"
    r"|\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{30,}"
    r"|\bxox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|\bAIza[0-9A-Za-z_\-]{30,}"
    r"|\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
    re.DOTALL,
)
_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:)([^\s@/]+)(@)", re.IGNORECASE)
_BEARER = re.compile(r"(\b(?:Bearer|Basic|Token)\s+)([A-Za-z0-9._~+/=\-]{12,})")
_NAMED = re.compile(
    r"""(\b[A-Za-z0-9_.\-]*(?:passw(?:or)?d|passphrase|pwd|secret|token|api[_\-]?key|"""
    r"""access[_\-]?key|private[_\-]?key|client[_\-]?secret|auth)[A-Za-z0-9_.\-]*"""
    r"""["']?\s*(?::|=|\s+is\s+)\s*["']?)(?!(?:Bearer|Basic|Token)\s)([^\s"'`,;]{4,})""",
    re.IGNORECASE,
)


def mask(text: str) -> tuple[str, int]:
    """``text`` with every secret found replaced by :data:`MASK`, and how many were."""
    count = 0

    def whole(_: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return MASK

    def value(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(2) == MASK or match.group(2).startswith("[secret"):
            return match.group(0)
        count += 1
        return match.group(1) + MASK + (match.group(3) if match.lastindex == 3 else "")

    text = _SHAPES.sub(whole, text)
    text = _URL_PASSWORD.sub(value, text)
    text = _BEARER.sub(value, text)
    text = _NAMED.sub(value, text)
    return text, count
