"""slm: a local-first memory engine for AI agents.

>>> from slm import Memory
>>> with Memory("notes.db") as memory:
...     memory.remember("Alice moved to Lisbon in March 2024", source="chat")
...     response = memory.recall("Where does Alice live?")
"""

from __future__ import annotations

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
from slm.release import VERSION
from slm.settings import Settings

__version__ = VERSION

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
