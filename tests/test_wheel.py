"""The wheel a user would install (issue #30): built from a copy of this checkout, installed
into a fresh virtual environment, and run as a user would run it: the demo, ``slm serve``
(the page, its stylesheet and ``/docs`` with every asset) and ``slm mcp`` through the
official client. A file left out of the wheel fails here, not on a user's machine.

The fresh environment gets the wheel and nothing else; the dependencies are read from this
test environment's site-packages through a ``.pth`` path line (which, unlike ``site``'s own
directories, does not run the editable install's hooks, so ``slm`` comes from the wheel).
"""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from test_http import free_port, server_env
from test_mcp import TOOLS

ROOT = Path(__file__).resolve().parents[1]
SKIP = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__",
                              ".*_cache", ".hypothesis")  # fmt: skip


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The ``bin`` folder of a new virtual environment holding only the built wheel."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=SKIP)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(work / "dist"),
         str(source)],
        check=True, timeout=600,
    )  # fmt: skip
    wheels = list((work / "dist").glob("slm_memory-*-py3-none-any.whl"))
    assert len(wheels) == 1, wheels
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", str(wheels[0])],
        check=True, timeout=300,
    )  # fmt: skip
    target = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    (Path(target) / "test-dependencies.pth").write_text("\n".join(site.getsitepackages()))
    where = subprocess.run(
        [str(python), "-c", "import slm; print(slm.__file__)"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    assert where.startswith(str(venv)), f"slm was imported from {where}, not the wheel"
    yield venv / "bin"


def test_the_demo_runs_from_the_wheel(fresh: Path, tmp_path: Path) -> None:
    env = {**server_env(tmp_path), "SLM_EMBEDDER": "minilm"}
    done = subprocess.run(
        [str(fresh / "slm"), "demo"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Stored 14 memories") and "Lisbon" in done.stdout
    assert "slm --profile demo recall" in done.stdout
    tokenizer = subprocess.run(
        [str(fresh / "python"), "-c", "from slm.embed.minilm import model_files; "
         "print(model_files()[1])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    assert tokenizer.startswith(str(fresh.parent)), f"the tokenizer came from {tokenizer}"


def test_serve_from_the_wheel_shows_the_page_and_the_docs(fresh: Path, tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [str(fresh / "slm"), "--db", str(tmp_path / "w.db"), "serve", "--port", str(port)],
        env=server_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            try:
                httpx.get(url + "/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        page = httpx.get(url + "/")
        assert page.status_code == 200 and "<form" in page.text
        for path in ("/ui/static/slm.css", "/docs", "/docs/openapi.json",
                     "/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css",
                     "/docs/assets/slm-docs.js"):  # fmt: skip
            assert httpx.get(url + path).status_code == 200, path
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_mcp_from_the_wheel_lists_its_tools(fresh: Path, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=str(fresh / "slm"),
        args=["--db", str(tmp_path / "m.db"), "mcp"],
        env={"SLM_EMBEDDER": "fake", "SLM_HOME": str(tmp_path)},
    )

    async def main() -> set[str]:
        with anyio.fail_after(120):
            async with Client(params, read_timeout_seconds=60) as client:
                listed = await client.list_tools()
                return {tool.name for tool in listed.tools}

    assert anyio.run(main) == TOOLS
