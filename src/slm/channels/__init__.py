"""Candidate producers, one module each, behind the :class:`Channel` protocol.

:data:`REGISTRY` is the one list of channels: their run order, and through each class its
name, default weight, needs and evidence role. A new channel is a new module and one line
here.
"""

from __future__ import annotations

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
