"""Several ``slm serve`` processes in front of one PostgreSQL (the team deployment): each
keeps its own indexes and read cache current from the change feed, so a write one server
acknowledged is found by the next recall on every other; nothing is lost or stored twice,
and killing a server (kill -9) in the middle of writes loses nothing it acknowledged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.test_http import free_port, server_env

#: Writes in all, spread over the servers by three writers.
WRITES = 600
PROFILE = {"X-SLM-Profile": "team"}


def start(dsn: str, home: Path, log: Path) -> tuple[subprocess.Popen[Any], str]:
    port = free_port()
    command = [sys.executable, "-m", "slm", "--dsn", dsn, "serve", "--port", str(port)]
    with log.open("w") as out:
        process = subprocess.Popen(command, env=server_env(home), stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        if process.poll() is not None:
            pytest.fail(f"server exited: {log.read_text()}")
        try:
            httpx.get(f"{url}/v1/health", timeout=1.0)
            return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    pytest.fail("server did not start within 30 s")


def found(client: httpx.Client, url: str, content: str, memory_id: str) -> bool:
    response = client.post(
        f"{url}/v1/recall", json={"query": content, "k": 10}, headers=PROFILE, timeout=30.0
    )
    response.raise_for_status()
    return memory_id in [r["id"] for r in response.json()["results"]]


def test_three_servers_share_one_postgres(postgres_dsn: str, tmp_path: Path) -> None:
    servers = [start(postgres_dsn, tmp_path, tmp_path / f"server{i}.log") for i in range(3)]
    urls = [url for _, url in servers]
    killed = threading.Event()
    acknowledged: dict[str, str] = {}  # content -> id, as a server acknowledged it
    misses: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()

    def writer(own: int) -> None:
        with httpx.Client() as client:
            for i in range(WRITES // 3):
                content = f"writer {own} note {i}: token w{own}n{i} about the shared garden"
                target = own
                while True:
                    if killed.is_set() and target == 0:
                        target = 1  # its server is gone: write through another one
                    try:
                        response = client.post(
                            f"{urls[target]}/v1/memories",
                            json={"content": content},
                            headers=PROFILE,
                            timeout=30.0,
                        )
                        response.raise_for_status()
                        break
                    except httpx.TransportError:
                        if target != 0:
                            raise
                        # no answer: not acknowledged; written again (identical content is
                        # stored once)
                memory_id = response.json()["id"]
                with lock:
                    acknowledged[content] = memory_id
                for other in range(3):
                    if other == target or (other == 0 and killed.is_set()):
                        continue
                    try:
                        if not found(client, urls[other], content, memory_id):
                            misses.append(f"server {other} missed {content}")
                    except httpx.TransportError:
                        if other != 0 or not killed.is_set():
                            raise

    def guarded(own: int) -> None:
        try:
            writer(own)
        except Exception as exc:  # reported by the test below
            errors.append(f"writer {own}: {exc!r}")

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(3)]
    try:
        for thread in threads:
            thread.start()
        while len(acknowledged) < WRITES // 3 and all(t.is_alive() for t in threads):
            time.sleep(0.05)
        os.kill(servers[0][0].pid, signal.SIGKILL)  # in the middle of writes and recalls
        killed.set()
        for thread in threads:
            thread.join(timeout=600)
        assert errors == [] and misses == []
        assert len(acknowledged) == WRITES
        with httpx.Client() as client:
            for url in urls[1:]:
                listed = client.get(
                    f"{url}/v1/memories", params={"limit": 1000}, headers=PROFILE, timeout=30
                ).json()["memories"]
                contents = [m["content"] for m in listed]
                assert len(contents) == len(set(contents)) == WRITES
                assert {m["content"]: m["id"] for m in listed} == acknowledged
    finally:
        for process, _ in servers:
            process.kill()
            process.wait()
