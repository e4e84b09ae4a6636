"""Running the channels of one recall: the standalone ones while the question is being
embedded, then the rest in registry order, each seeing the hits of those before it."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from slm.channels import Channel, Context, Hit, standalone

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ChannelRun:
    name: str
    ran: bool
    hits: tuple[Hit, ...] = ()
    ms: float = 0.0
    reason: str | None = None
    error: str | None = None


def run_channels(
    channels: Mapping[str, Channel],
    enabled: Sequence[str],
    context: Context,
    k: int,
    done: Mapping[str, ChannelRun] = MappingProxyType({}),
) -> list[ChannelRun]:
    """Run every enabled, healthy channel in order, each seeing the hits of those before it
    (``context.prior``).

    Channels in ``done`` already ran (see :func:`run_standalone`): their runs are taken as
    they are. A channel that raises is recorded with its error (trace and health), never
    dropped silently.
    """
    runs: list[ChannelRun] = []
    context.prior.clear()
    for name, channel in channels.items():
        run = done.get(name)
        if run is None:
            run = _run_one(name, channel, enabled, context, k)
        if run.ran:
            context.prior[name] = run.hits
        runs.append(run)
    return runs


def run_standalone(
    channels: Mapping[str, Channel], enabled: Sequence[str], context: Context, k: int
) -> dict[str, ChannelRun]:
    """Run the channels that need neither the query vector nor other channels' hits
    (:func:`slm.channels.standalone`): the engine runs them while the question is being
    embedded."""
    return {
        name: _run_one(name, channel, enabled, context, k)
        for name, channel in channels.items()
        if standalone(channel)
    }


def _run_one(
    name: str, channel: Channel, enabled: Sequence[str], context: Context, k: int
) -> ChannelRun:
    if name not in enabled:
        return ChannelRun(name, ran=False, reason="disabled")
    health = channel.health()
    if not health.healthy:
        return ChannelRun(name, ran=False, reason=health.reason)
    start = time.perf_counter()
    try:
        hits = tuple(channel.candidates(context, k))
    except Exception as exc:  # reported in trace and health; the recall goes on
        log.warning("channel %s failed: %s", name, exc, exc_info=True)
        return ChannelRun(name, ran=False, reason="error", error=f"{type(exc).__name__}: {exc}")
    return ChannelRun(name, ran=True, hits=hits, ms=(time.perf_counter() - start) * 1000)
