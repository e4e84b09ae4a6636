"""``slm-hook HOST EVENT [--profile NAME] [--db PATH]``: what an agent host runs on a
lifecycle event, with the event's JSON payload on stdin (docs/hooks.md).

It imports nothing of slm's engine (a hook runs on every prompt; loading the model there
would cost a second): it reads the payload, finds the project and whether it opted out,
and forwards the event over loopback to the user's warm process
(:mod:`slm.hosts.hooks.worker`), starting it when none answers. For a prompt or a session's
start it waits at most a budget for the block to inject and prints it in the host's form;
for a capture (Stop, PreCompact, SessionEnd) it writes the event to the spool the warm
process drains and returns at once, so nothing is lost when no process is up yet.

Toward the host it never fails: whatever goes wrong (an unknown host or event, bad JSON,
no process within the budget) it exits 0 having printed nothing, and writes one line to
the hooks' log (``hooks/hooks.log`` in slm's data directory).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

from slm.hosts.hooks.place import hooks_folder
from slm.hosts.hooks.project import opted_out, project_of

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

#: Each host's events: the ones that inject (the hook waits) and the ones that capture.
INJECT_EVENTS = {
    "claude-code": ("SessionStart", "UserPromptSubmit"),
    "gemini-cli": ("SessionStart", "BeforeAgent"),
    "codex-cli": ("SessionStart", "UserPromptSubmit"),
}
CAPTURE_EVENTS = {
    "claude-code": ("Stop", "PreCompact", "SessionEnd"),
    "gemini-cli": ("AfterAgent",),
    "codex-cli": ("Stop",),
}
#: Seconds a prompt's hook waits for its block, and a session start's (which may start
#: the warm process and load the model): ``SLM_HOOK_WAIT_PROMPT``, ``SLM_HOOK_WAIT_START``.
WAIT_PROMPT, WAIT_START = 2.0, 10.0
#: The most payload read from stdin.
MAX_PAYLOAD = 8 * 1024 * 1024
#: The log's size past which its older half is dropped.
LOG_BYTES = 1024 * 1024
#: The header that carries the warm process's secret.
SECRET_HEADER = "X-Slm-Secret"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the hook; always 0."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        return _run(args)
    except BaseException as exc:  # the host must never see a failure or a traceback
        log(" ".join(args[:2]), f"failed: {type(exc).__name__}: {exc}")
        return 0


def _run(args: list[str]) -> int:
    options, where = _options(args)
    if len(where) != 2:
        log(" ".join(args), "usage: slm-hook HOST EVENT [--profile NAME] [--db PATH]")
        return 0
    host, event = where
    injects = event in INJECT_EVENTS.get(host, ())
    if not injects and event not in CAPTURE_EVENTS.get(host, ()):
        log(f"{host} {event}", "unknown host or event: nothing done")
        return 0
    if os.environ.get("SLM_HOOKS", "").strip().lower() in ("0", "off", "false", "no"):
        return 0
    raw = sys.stdin.buffer.read(MAX_PAYLOAD + 1)
    if len(raw) > MAX_PAYLOAD:
        log(f"{host} {event}", f"payload over {MAX_PAYLOAD} bytes: nothing done")
        return 0
    payload = json.loads(raw.decode("utf-8", errors="replace"))
    if not isinstance(payload, dict):
        log(f"{host} {event}", "payload is not a JSON object: nothing done")
        return 0
    given = payload.get("cwd")
    cwd = given if isinstance(given, str) and given else os.getcwd()
    project = project_of(cwd)
    if opted_out(cwd, project):
        return 0
    profile = options.get("profile") or os.environ.get("SLM_PROFILE") or "default"
    db = options.get("db") or os.environ.get("SLM_DB") or None
    request = {
        "host": host,
        "event": event,
        "profile": profile,
        "db": db,
        "project": project,
        "payload": payload,
        "minimum": _minimum(),
    }
    if not injects:
        spool({**request, "spooled_ns": time.time_ns()})
        if post("/drain", {}, 0.5) is None:
            start_worker(db, profile)
        return 0
    wait = _seconds("SLM_HOOK_WAIT_START" if "Start" in event else "SLM_HOOK_WAIT_PROMPT",
                    WAIT_START if "Start" in event else WAIT_PROMPT)  # fmt: skip
    deadline = time.monotonic() + wait
    answer = post("/event", request, wait)
    if answer is None and address() is None:  # none up: start one, within the same budget
        start_worker(db, profile)
        left = deadline - time.monotonic()
        answer = post("/event", request, max(0.05, left), patience=left)
    if answer is None:
        log(f"{host} {event}", f"no answer from the warm process within {wait:.1f} s")
        return 0
    context = answer.get("context")
    if isinstance(context, str) and context:
        sys.stdout.write(render(host, event, context))
        sys.stdout.flush()
    return 0


def render(host: str, event: str, context: str) -> str:
    """What the hook prints for ``context`` in ``host``'s documented form (Claude Code,
    Gemini CLI and Codex CLI alike: ``hookSpecificOutput.additionalContext``)."""
    out = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}
    return json.dumps(out, ensure_ascii=False) + "\n"


def _options(args: list[str]) -> tuple[dict[str, str], list[str]]:
    options: dict[str, str] = {}
    where: list[str] = []
    items = iter(args)
    for item in items:
        name, _, value = item.partition("=")
        if name in ("--profile", "--db"):
            options[name[2:]] = value if value else next(items, "")
        else:
            where.append(item)
    return options, where


def _minimum() -> float | None:
    """``SLM_HOOK_MIN_RELEVANCE`` (0..1), the minimum relevance of what is injected; None:
    the shipped default."""
    try:
        value = float(os.environ["SLM_HOOK_MIN_RELEVANCE"])
    except (KeyError, ValueError):
        return None
    return value if 0.0 <= value <= 1.0 else None


def _seconds(name: str, default: float) -> float:
    try:
        return max(0.05, float(os.environ[name]))
    except (KeyError, ValueError):
        return default


def spool(request: Mapping[str, Any]) -> str:
    """Write ``request`` to the spool (one private file, named to sort in arrival order)."""
    folder = os.path.join(hooks_folder(), "spool")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    name = f"{time.time_ns():020d}-{os.urandom(4).hex()}.json"
    part = os.path.join(folder, f".{name}")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(request, out, ensure_ascii=False)
    os.replace(part, os.path.join(folder, name))
    return os.path.join(folder, name)


def address() -> tuple[int, str] | None:
    """The warm process's port and secret, from its file when the file is this user's own
    and private and the process it names is alive; else None."""
    where = os.path.join(hooks_folder(), "worker.json")
    try:
        with open(where, encoding="utf-8") as stream:
            status = os.fstat(stream.fileno())
            if status.st_uid != os.getuid() or status.st_mode & 0o077:
                return None
            found = json.loads(stream.read())
        os.kill(int(found["pid"]), 0)  # a process that died may have left its port to another
        return int(found["port"]), str(found["secret"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def post(
    route: str, body: Mapping[str, Any], timeout: float, patience: float = 0.0
) -> dict[str, Any] | None:
    """POST ``body`` to the warm process and its JSON answer; None when no process answers
    (after trying for ``patience`` seconds, while one starts) or the answer is not JSON."""
    deadline = time.monotonic() + patience
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    while True:
        found = address()
        if found is not None:
            try:
                left = deadline - time.monotonic() if patience else timeout
                return _ask(found, route, data, max(0.05, min(timeout, left)))
            except ConnectionRefusedError:
                pass
            except (OSError, ValueError):
                return None
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _ask(found: tuple[int, str], route: str, data: bytes, timeout: float) -> dict[str, Any] | None:
    """One HTTP/1.0 exchange over a plain socket (``http.client`` alone takes longer to
    import than the whole exchange)."""
    port, secret = found
    head = (
        f"POST {route} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n{SECRET_HEADER}: {secret}\r\n\r\n"
    )
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as connection:
        connection.settimeout(timeout)
        connection.connect(("127.0.0.1", port))  # an address, not a name: no resolver
        connection.sendall(head.encode("ascii") + data)
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    reply = b"".join(chunks)
    status_line, _, rest = reply.partition(b"\r\n")
    _, _, body = rest.partition(b"\r\n\r\n")
    parts = status_line.split()
    if len(parts) < 2 or parts[1] != b"200":
        return None
    answer = json.loads(body or b"null")
    return answer if isinstance(answer, dict) else None


def start_worker(db: str | None, profile: str) -> None:
    """Start the warm process, detached from the hook (it outlives it and the host's
    session), opening the hook's store and profile first; a second one started meanwhile
    finds the first holding the lock and exits."""
    import subprocess

    given = ["--profile", profile] + (["--db", db] if db else [])
    with open(os.path.join(hooks_folder(), "worker.out"), "ab") as out:
        subprocess.Popen(
            [sys.executable, "-m", "slm.hosts.hooks.worker", *given],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            close_fds=True,
        )


def log(what: str, message: str) -> None:
    """One line in the hooks' log (never raises)."""
    try:
        where = os.path.join(hooks_folder(), "hooks.log")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        line = f"{stamp} pid {os.getpid()} {what}: {' '.join(message.split())[:500]}\n"
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as out:
            out.write(line)
        if os.path.getsize(where) > LOG_BYTES:
            with open(where, "rb") as stream:
                data = stream.read()[-LOG_BYTES // 2 :]
            with open(where, "wb") as stream:
                stream.write(data[data.find(b"\n") + 1 :])
    except Exception:
        pass


if __name__ == "__main__":
    sys.exit(main())
