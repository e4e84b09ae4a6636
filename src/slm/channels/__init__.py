"""Candidate producers, one module each, behind the :class:`Channel` protocol."""

from __future__ import annotations

from collections.abc import Callable

from slm.channels.base import Channel, Health, Hit, Query, ranked
from slm.channels.bm25 import BM25Channel
from slm.channels.hopfield import HopfieldChannel
from slm.channels.semantic import SemanticChannel
from slm.channels.spreading import SpreadingChannel
from slm.channels.standing import StandingChannel
from slm.channels.temporal import TemporalChannel
from slm.settings import Settings
from slm.store import Store

__all__ = ["REGISTRY", "Channel", "Health", "Hit", "Query", "build_channels", "ranked"]

#: Channel name -> constructor. The engine runs exactly the channels built from here.
REGISTRY: dict[str, Callable[[Store, Settings], Channel]] = {
    "semantic": SemanticChannel,
    "bm25": BM25Channel,
    "temporal": TemporalChannel,
    "standing": StandingChannel,
    "hopfield": HopfieldChannel,
    "spreading": SpreadingChannel,
}


def build_channels(store: Store, settings: Settings) -> dict[str, Channel]:
    """Every registered channel, in running order: channels later in the order see the hits
    of earlier ones (``Query.prior``), so the graph channels come last."""
    return {name: factory(store, settings) for name, factory in REGISTRY.items()}
