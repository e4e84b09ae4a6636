"""The ``slm`` command (:mod:`slm.cli.main`), one module per group of commands: ``base``
(options, the context, error handling), ``output`` (what the commands print),
``profiles``, ``transfer`` (import and export), ``servers`` (serve, mcp, ui) and
``calibrate``. A thin adapter from the shell to :class:`slm.Memory`."""

from slm.cli.main import cli, main

__all__ = ["cli", "main"]
