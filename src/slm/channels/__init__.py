"""Candidate producers, one module each, behind the :class:`Channel` protocol.

:data:`REGISTRY` is the one list of channels: their run order, and through each class its
name, default weight, needs and evidence role. A new channel is a new module and one line
here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slm.channels.base import Channel, Context, Health, Hit, Query, ranked, standalone
from slm.channels.bm25 import BM25Channel
from slm.channels.hopfield import HopfieldChannel
from slm.channels.semantic import SemanticChannel
from slm.channels.spreading import SpreadingChannel
from slm.channels.standing import StandingChannel
from slm.channels.temporal import TemporalChannel
from slm.errors import ConfigError
from slm.settings import Settings, channel_list

__all__ = [
    "ALL_CHANNELS",
    "REGISTRY",
    "Channel",
    "Context",
    "Health",
    "Hit",
    "Query",
    "build_channels",
    "enabled",
    "health",
    "ranked",
    "registered",
    "standalone",
    "weight",
]

#: Every channel, in the order they run: later channels see earlier ones' hits
#: (``Context.prior``), so those that need them come last.
REGISTRY: tuple[type[Channel], ...] = (
    SemanticChannel,
    BM25Channel,
    TemporalChannel,
    StandingChannel,
    HopfieldChannel,
    SpreadingChannel,
)

#: The names of the channels slm ships, in run order.
ALL_CHANNELS: tuple[str, ...] = tuple(channel.name for channel in REGISTRY)


def registered() -> tuple[str, ...]:
    """The names of every channel in :data:`REGISTRY` now, in run order."""
    return tuple(channel.name for channel in REGISTRY)


def build_channels(settings: Settings) -> dict[str, Channel]:
    """One instance of every registered channel, in run order, once ``settings`` names
    only known channels."""
    check(settings)
    return {channel.name: channel(settings) for channel in REGISTRY}


def names(text: str, what: str) -> tuple[str, ...]:
    """Known channel names from comma-separated ``text``; :class:`ConfigError` otherwise."""
    chosen = channel_list(text, what)
    check(Settings(channels=chosen))
    return chosen


def check(settings: Settings) -> None:
    """Raise :class:`ConfigError` when ``settings`` names a channel that does not exist."""
    known = registered()
    named = [*(settings.channels or ()), *settings.required_channels, *settings.weights]
    for name in named:
        if name not in known:
            raise ConfigError(f"unknown channel {name!r}; known: {', '.join(known)}")


def enabled(settings: Settings) -> tuple[str, ...]:
    """The channels ``settings`` lets run (every channel by default)."""
    return settings.channels if settings.channels is not None else registered()


def weight(settings: Settings, channel: Channel) -> float:
    """The fusion weight of ``channel``: the setting's, else the channel's own default."""
    return float(settings.weights.get(channel.name, channel.weight))


def health(
    channel: Channel | None, on: bool, last_error: str | None, counts: Mapping[str, int] | None
) -> dict[str, Any]:
    """A channel's health as reported: its own check, then whether it failed in the last
    recall, then whether its index misses memories (``counts``: rows per index, needed
    when the channel has an index)."""
    if channel is None:
        return {"healthy": False, "reason": "not available in this version", "enabled": False}
    state = channel.health()
    reason = state.reason
    if state.healthy and last_error is not None:
        reason = f"failed in the last recall: {last_error}"
    if reason is None and channel.index is not None and counts is not None:
        missing = counts["memories"] - counts[channel.index]
        if missing:
            reason = f"{missing} memories are missing from its index; run 'slm reindex'"
    return {"healthy": reason is None, "reason": reason, "enabled": on}
