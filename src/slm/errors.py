"""The one exception tree of slm.

Every error the library raises on purpose is a :class:`SlmError`. Adapters translate
them through one table, :data:`OUTCOMES`: the CLI prints the message and exits non-zero, the
MCP server returns a tool error, the HTTP API answers with a 4xx/5xx JSON body.

    SlmError
    ├── InvalidInput        bad argument from the caller (HTTP 400); also a ValueError
    ├── NotFound            no memory with that id in this profile (HTTP 404); also a KeyError
    ├── ConfigError         settings, environment or store/embedder mismatch
    │   ├── ModelError      a ranking model is corrupt or was made for other features
    │   └── CalibrationError  a calibration artefact is altered, malformed or made for
    │                       another release or configuration; or labels cannot be used
    ├── ChannelUnavailable  a required retrieval channel is unhealthy at startup
    ├── EmbedderError       the embedding model could not be loaded or run
    └── StoreError          the store could not be opened, read or written
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class SlmError(Exception):
    """Base class of every error slm raises on purpose."""


class InvalidInput(SlmError, ValueError):
    """An argument was rejected; the message names the argument and the rule it broke.

    ``field`` is the argument's name (``content``, ``k``, ``metadata``...) when one argument
    is to blame, and ``index`` the position of the offending item in a batch.
    """

    def __init__(self, message: str, *, field: str | None = None, index: int | None = None):
        super().__init__(message)
        self.field = field
        self.index = index

    def __reduce__(self) -> tuple[Any, ...]:
        # Keeps field and index when the error crosses a process boundary (pickle).
        return (_invalid_input, (str(self), self.field, self.index))


def _invalid_input(message: str, field: str | None, index: int | None) -> InvalidInput:
    return InvalidInput(message, field=field, index=index)


class NotFound(SlmError, KeyError):
    """No memory with the given id exists in this profile."""

    def __str__(self) -> str:
        # KeyError quotes its argument; a plain message reads better everywhere.
        return str(self.args[0]) if self.args else "not found"


class ConfigError(SlmError):
    """Settings or environment are inconsistent (e.g. a store built with another embedder)."""


class ModelError(ConfigError):
    """A ranking model (a file, or a profile's learned model) cannot be used: not a model,
    corrupt, or trained on other features than this version computes."""


class CalibrationError(ConfigError):
    """A calibration artefact cannot be used (edited after it was written, malformed, made
    for another release or retrieval configuration), or a calibration cannot be fitted from
    the labels given (docs/calibration.md). The message says which."""


class ChannelUnavailable(SlmError):
    """A channel listed in ``required_channels`` is unhealthy."""


class EmbedderError(SlmError):
    """The embedding model could not be loaded or failed to run."""


class StoreError(SlmError):
    """The store could not be opened, read or written."""


def disk_full(location: object) -> str:
    """What a write that found no room says: the write was rolled back whole."""
    return (
        f"the disk holding {location} is full: nothing of this write was stored; "
        "free some space and try again"
    )


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an error becomes at each surface: the HTTP status and error ``type`` of the REST
    API, the exit status of the command line, the prefix of an MCP tool error."""

    http_status: int
    kind: str
    exit_code: int
    tool_prefix: str


#: The one map from library errors to every surface (the most specific class wins).
OUTCOMES: dict[type[SlmError], Outcome] = {
    InvalidInput: Outcome(400, "invalid_input", 1, "invalid input"),
    NotFound: Outcome(404, "not_found", 1, "not found"),
    ChannelUnavailable: Outcome(503, "unavailable", 1, "unavailable"),
    EmbedderError: Outcome(503, "unavailable", 1, "unavailable"),
    StoreError: Outcome(503, "unavailable", 1, "unavailable"),
    ConfigError: Outcome(500, "error", 1, "configuration error"),
    ModelError: Outcome(500, "error", 1, "ranking model error"),
    CalibrationError: Outcome(500, "error", 1, "calibration error"),
    SlmError: Outcome(500, "error", 1, "error"),
}


def outcome(exc: SlmError) -> Outcome:
    """The :data:`OUTCOMES` entry of ``exc``'s most specific class."""
    for kind in type(exc).__mro__:
        if kind in OUTCOMES:
            return OUTCOMES[kind]
    return OUTCOMES[SlmError]


#: The distribution's name (not on the package index yet). The command and the import are
#: ``slm``: the distribution called ``slm`` on the index is another project.
DISTRIBUTION = "slm-memory"


def install_hint(extra: str | None = None) -> str:
    """How to install slm (with ``extra``). The distribution is not on the package index
    yet, so the hint names what works today: a checkout, or a wheel built from one."""
    from slm.release import VERSION

    spec = f"[{extra}]" if extra else ""
    wheel = f"slm_memory-{VERSION}-py3-none-any.whl"
    return f"pip install '.{spec}' in a checkout of slm (or pip install '{wheel}{spec}')"
