"""The user's warm process for the hooks: one per user (per slm data directory), started by
the first hook that finds none, detached, reused by every hook after, and stopped after
``SLM_HOOK_IDLE`` seconds (default 1800) without an event.

It listens on loopback at a port the system chooses, and writes the port and a secret made
at start to ``hooks/worker.json`` (0600) for the hooks to read; a request without the
secret is refused, so another local user cannot post. It holds one open
:class:`~slm.Memory` per store and profile the hooks name, answers a prompt or a session
start with the block to inject (:mod:`slm.hosts.hooks.inject`), and drains the spool of
captures in arrival order on one thread (:mod:`slm.hosts.hooks.capture`), each spooled
event removed once done. Every event it handles is one line in the journal the page reads
(:mod:`slm.hosts.hooks.journal`); a failure is one line in the hooks' log.

``python -m slm.hosts.hooks.worker [--idle SECONDS] [--db PATH] [--profile NAME]``.
"""

from __future__ import annotations

import argparse
import fcntl
import hmac
import json
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from slm.hosts.hooks.place import hooks_dir, write_private
from slm.hosts.hooks.thin import SECRET_HEADER, log

#: Seconds without an event after which the process stops.
IDLE = 1800.0
#: The largest request body read.
MAX_BODY = 16 * 1024 * 1024
#: Codex CLI prompts kept until their turn's Stop (its payload holds only the reply).
PROMPTS_KEPT = 256


class Worker:
    """The process's state: the open memories, the spool and when it was last used."""

    def __init__(self, folder: Path) -> None:
        from slm.settings import Settings

        self.folder, self.settings = folder, Settings.from_env()
        self.secret = secrets.token_hex(32)
        self.used = time.monotonic()
        self.wake = threading.Event()
        self._lock = threading.Lock()
        self._memories: dict[tuple[str | None, str], Any] = {}
        self._prompts: dict[tuple[Any, Any], str] = {}

    def memory(self, db: str | None, profile: str) -> Any:
        from slm.engine import Memory

        with self._lock:
            key = (db, profile)
            if key not in self._memories:
                if db is not None and "://" in db:
                    opened = Memory(dsn=db, profile=profile, settings=self.settings)
                else:
                    opened = Memory(db, profile=profile, settings=self.settings)
                self._memories[key] = opened
            return self._memories[key]

    def warm(self, db: str | None, profile: str) -> None:
        """Open the store the first hook named and load the model now, before the first
        prompt."""
        memory = self.memory(db, profile)
        memory.embedder.embed_batch(["warm up"])

    def close(self) -> None:
        with self._lock:
            for memory in self._memories.values():
                memory.close()
            self._memories.clear()

    def inject(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The block for a prompt or a session start, and its journal line."""
        from slm.hosts.hooks import inject, journal
        from slm.hosts.hooks.mask import mask

        payload, event = request["payload"], str(request["event"])
        db, profile = request.get("db"), str(request.get("profile") or "default")
        memory = self.memory(db, profile)
        session = payload.get("session_id")
        began = time.perf_counter()
        if event == "SessionStart":
            found = inject.for_start(memory, request["project"], session)
            prompt = str(payload.get("source") or "")
        else:
            prompt = str(payload.get("prompt") or "")
            minimum = request.get("minimum")
            found = inject.for_prompt(
                memory,
                prompt,
                request["project"],
                session,
                rule=inject.DEFAULT_RULE
                if minimum is None
                else replace(inject.DEFAULT_RULE, gate=float(minimum)),
            )
        entry = {
            "time": _now(),
            "host": request["host"],
            "event": event,
            "session": session,
            "project": request["project"],
            "prompt": mask(prompt)[0][:300],  # the journal keeps no secret either
            "why": found.why,
            "detail": found.detail,
            "best": found.best,
            "shown": [list(s) for s in found.shown],
            "chars": len(found.block),
            "ms": round((time.perf_counter() - began) * 1000, 2),
            **found.extra,
        }
        journal.append(journal.path(memory.location, profile), entry)
        if request["host"] == "codex-cli" and event == "UserPromptSubmit":
            self._prompts[(session, payload.get("turn_id"))] = prompt
            while len(self._prompts) > PROMPTS_KEPT:
                self._prompts.pop(next(iter(self._prompts)))
        return {"context": found.block, "why": found.why, "shown": entry["shown"]}

    def drain(self) -> int:
        """Capture every spooled event, oldest first, one capture per session however many
        of its events wait (each reads the transcript to its end); how many were handled."""
        pending: dict[tuple[Any, ...], list[tuple[Path, dict[str, Any]]]] = {}
        for item in sorted((self.folder / "spool").glob("[0-9]*.json")):
            try:
                request = json.loads(item.read_text(encoding="utf-8"))
                payload = request["payload"]
                # A transcript is read to its end by one capture; a turn given in the
                # payload itself (Gemini CLI's AfterAgent) is its own.
                key = (request.get("db"), request.get("profile"), payload.get("session_id"),
                       payload.get("transcript_path") if request["host"] == "claude-code"
                       else item.name)  # fmt: skip
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                log(f"capture {item.name}", f"unreadable: {type(exc).__name__}: {exc}")
                item.unlink(missing_ok=True)
                continue
            pending.setdefault(key, []).append((item, request))
        for events in pending.values():
            self._capture(events[-1][1], len(events), events[0][1].get("spooled_ns"))
            for item, _ in events:
                item.unlink(missing_ok=True)
            self.used = time.monotonic()
        return sum(map(len, pending.values()))

    def _capture(self, request: dict[str, Any], events: int, spooled_ns: object) -> None:
        from slm.hosts.hooks import capture, journal

        began = time.perf_counter()
        try:
            db, profile = request.get("db"), str(request.get("profile") or "default")
            memory = self.memory(db, profile)
            payload = request["payload"]
            if request["host"] == "codex-cli":  # Stop holds the reply; the prompt was asked
                said = self._prompts.pop((payload.get("session_id"), payload.get("turn_id")), None)
                payload = {**payload, "prompt": said,
                           "prompt_response": payload.get("last_assistant_message")}  # fmt: skip
            result = capture.capture(
                memory, payload, request["project"], host=request["host"], db=db
            )
            journal.append(
                journal.path(memory.location, profile),
                {
                    "time": _now(),
                    "host": request["host"],
                    "event": request["event"],
                    "events": events,
                    "session": payload.get("session_id"),
                    "project": request["project"],
                    "captured": list(result.created),
                    "turns": result.turns,
                    "observations": result.observations,
                    "skipped": result.skipped,
                    "masked": result.masked,
                    "ms": round((time.perf_counter() - began) * 1000, 2),
                    "after_ms": _since(spooled_ns),
                },
            )
        except Exception as exc:
            log(f"capture {request.get('event')}", f"failed: {type(exc).__name__}: {exc}")


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        worker = self.server.worker
        worker.used = time.monotonic()
        given = self.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), worker.secret.encode()):
            self._answer(403, {"error": "forbidden"})
            return
        try:
            size = int(self.headers.get("Content-Length") or 0)
            if not 0 <= size <= MAX_BODY:
                raise ValueError(f"a body of {size} bytes")
            body = json.loads(self.rfile.read(size) or b"{}")
            if self.path == "/drain":
                worker.wake.set()
                self._answer(200, {"ok": True})
            elif self.path == "/event" and isinstance(body, dict):
                self._answer(200, worker.inject(body))
            else:
                self._answer(404, {"error": "no such route"})
        except Exception as exc:
            log(f"worker {self.path}", f"failed: {type(exc).__name__}: {exc}")
            self._answer(500, {"error": type(exc).__name__})

    def _answer(self, status: int, body: Mapping[str, Any]) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged (the journal says what was done)."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    worker: Worker


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slm.hosts.hooks.worker")
    parser.add_argument("--idle", type=float, default=float(os.environ.get("SLM_HOOK_IDLE", IDLE)))
    parser.add_argument("--db", help="The store to open first (default: SLM_DB, else slm's).")
    parser.add_argument("--profile", default="default", help="The profile to open first.")
    args = parser.parse_args(argv)
    folder = hooks_dir()
    (folder / "spool").mkdir(exist_ok=True, mode=0o700)
    lock = open(folder / "worker.lock", "a")  # noqa: SIM115 (held while this process lives)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another warm process is up
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop as after idling
    worker = Worker(folder)
    server = _Server(("127.0.0.1", 0), _Handler)
    server.worker = worker
    mine = folder / "worker.json"
    port = server.server_address[1]
    write_private(mine, json.dumps({"port": port, "secret": worker.secret, "pid": os.getpid()}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        worker.warm(args.db or os.environ.get("SLM_DB") or None, args.profile)
        while time.monotonic() - worker.used < args.idle:
            worker.wake.wait(1.0)
            worker.wake.clear()
            if worker.drain():
                worker.used = time.monotonic()
    except Exception as exc:
        log("worker", f"stopped: {type(exc).__name__}: {exc}")
    finally:
        server.shutdown()
        _forget_address(mine)
        worker.close()
        lock.close()
    return 0


def _forget_address(mine: Path) -> None:
    try:
        if json.loads(mine.read_text(encoding="utf-8")).get("pid") == os.getpid():
            mine.unlink()
    except (OSError, ValueError):
        pass


def _since(spooled_ns: object) -> float | None:
    """Milliseconds since the hook spooled the event (what a capture costs the user: the
    time until its turns are stored)."""
    if not isinstance(spooled_ns, int):
        return None
    return round((time.time_ns() - spooled_ns) / 1e6, 2)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


if __name__ == "__main__":
    sys.exit(main())
