"""The commands that serve memory: ``slm mcp`` (MCP over stdio), ``slm serve`` (the REST API
and the web page) and ``slm ui`` (the web page on this machine, opened in the browser)."""

from __future__ import annotations

import gc
import os
import webbrowser
from collections.abc import Callable

import click

from slm.cli.base import Context


@click.command()
@click.pass_obj
def mcp(obj: Context) -> None:
    """Serve the profile's memory to MCP clients (Claude Code, Cursor...) over stdio."""
    from slm.server.mcp import run_stdio

    with obj.memory(calibrated=True) as memory:
        settle()
        run_stdio(memory)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option(
    "--trusted-proxies",
    envvar="SLM_TRUSTED_PROXIES",
    default="",
    metavar="ADDRESSES",
    help="Reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are believed "
    "(comma-separated addresses or networks); by default none is.",
)
@click.pass_obj
def serve(obj: Context, host: str, port: int, trusted_proxies: str) -> None:
    """Serve the REST API and the web page at /; a non-loopback --host needs SLM_API_TOKEN."""

    def ready(url: str) -> None:
        click.echo(f"slm serves the REST API and the web page at {url} (Ctrl+C stops it)", err=True)

    _serve(obj, host, port, ready, trusted_proxies)


@click.command()
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, help="Port (default: any free one)."
)
@click.option("--no-browser", is_flag=True, help="Print the address; open no browser.")
@click.pass_obj
def ui(obj: Context, port: int, no_browser: bool) -> None:
    """Open the web page on this machine: browse, search, trace and fix memories."""

    def ready(url: str) -> None:
        click.echo(f"slm's page is at {url} (Ctrl+C stops it)", err=True)
        if os.environ.get("SLM_API_TOKEN"):
            click.echo("sign in there with SLM_API_TOKEN", err=True)
        if not no_browser:
            webbrowser.open(url)

    _serve(obj, "127.0.0.1", port, ready)


def _serve(
    obj: Context, host: str, port: int, ready: Callable[[str], None], trusted_proxies: str = ""
) -> None:
    from slm.server.rest import serve as serve_http

    settings = obj.settings()
    if settings.calibration is not None:
        with obj.memory(calibrated=True):
            pass  # a calibration artefact the server cannot use stops it here, said plainly
    settle()
    serve_http(
        host=host,
        port=port,
        location=obj.location(),
        default_profile=obj.profile,
        token=os.environ.get("SLM_API_TOKEN"),
        settings=settings,
        ready=ready,
        trusted_proxies=trusted_proxies,
    )


def settle() -> None:
    """What a server has loaded before serving stays for its life (modules and settings;
    for ``slm mcp`` its open store too; ``slm serve`` opens stores as profiles are asked
    for): moved out of the garbage collector's view, so that its full passes scan only
    what came after. At 100k memories the longest pause over 200 recalls went from
    36-43 to 25 ms (docs/scale.md, "Pauses"). Objects frozen are still freed when nothing
    refers to them; only cycles among them would stay."""
    gc.collect()
    gc.freeze()
