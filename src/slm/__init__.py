"""slm: a local-first memory engine for AI agents.

>>> from slm import Memory
>>> with Memory("notes.db") as memory:
...     memory.remember("Alice moved to Lisbon in March 2024", source="chat")
...     response = memory.recall("Where does Alice live?")

The names below are imported on first use (PEP 562), so that a module of the package that
needs none of them, such as the host hook (:mod:`slm.hosts.hooks.thin`), starts without
loading the engine, its model runtime and its stores (about half a second).
"""

from __future__ import annotations

from importlib import import_module

from slm.release import VERSION

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a few ms)
if TYPE_CHECKING:
    from typing import Any

    from slm.aio import AsyncMemory
    from slm.channels import ALL_CHANNELS
    from slm.contract import SCORE_CONTRACT_VERSION, ChannelRank, RecallResponse, RecallResult
    from slm.engine import Memory, MemoryInput, Remembered
    from slm.errors import (
        CalibrationError,
        ChannelUnavailable,
        ConfigError,
        EmbedderError,
        InvalidInput,
        ModelError,
        NotFound,
        SlmError,
        StoreError,
    )
    from slm.models import MemoryRecord, RecallRequest
    from slm.settings import Settings

__version__ = VERSION

#: Where each public name lives.
_HOMES = {
    "AsyncMemory": "slm.aio",
    "ALL_CHANNELS": "slm.channels",
    "SCORE_CONTRACT_VERSION": "slm.contract",
    "ChannelRank": "slm.contract",
    "RecallResponse": "slm.contract",
    "RecallResult": "slm.contract",
    "Memory": "slm.engine",
    "MemoryInput": "slm.engine",
    "Remembered": "slm.engine",
    "CalibrationError": "slm.errors",
    "ChannelUnavailable": "slm.errors",
    "ConfigError": "slm.errors",
    "EmbedderError": "slm.errors",
    "InvalidInput": "slm.errors",
    "ModelError": "slm.errors",
    "NotFound": "slm.errors",
    "SlmError": "slm.errors",
    "StoreError": "slm.errors",
    "MemoryRecord": "slm.models",
    "RecallRequest": "slm.models",
    "Settings": "slm.settings",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'slm' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))


__all__ = [
    "ALL_CHANNELS",
    "SCORE_CONTRACT_VERSION",
    "AsyncMemory",
    "CalibrationError",
    "ChannelRank",
    "ChannelUnavailable",
    "ConfigError",
    "EmbedderError",
    "InvalidInput",
    "Memory",
    "MemoryInput",
    "MemoryRecord",
    "ModelError",
    "NotFound",
    "RecallRequest",
    "RecallResponse",
    "RecallResult",
    "Remembered",
    "Settings",
    "SlmError",
    "StoreError",
    "__version__",
]
