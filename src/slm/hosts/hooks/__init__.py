"""Hooks: what an agent host (Claude Code first) runs on its lifecycle events, so that memory
fills itself (docs/hooks.md).

The host runs :mod:`slm.hosts.hooks.thin` (the ``slm-hook`` command), which imports nothing
heavy: it forwards the event to the user's warm process (:mod:`slm.hosts.hooks.worker`),
which owns the store, recalls for a prompt (:mod:`slm.hosts.hooks.inject`) and captures a
session's transcript (:mod:`slm.hosts.hooks.capture`). This package's ``__init__`` imports
nothing, so that the thin hook stays light.
"""
