"""Who is signed in to the page, and who keeps guessing the token.

A page session is a random id, created at sign-in and only there, kept in this server
process with its expiry and its own form token, and sent to the browser in a cookie.
Requests without one create nothing: a flood of them evicts no one's session. A server
without a token has no sign-in; each browser there gets a visitor's id
(:meth:`Sessions.visitor`), which is not kept: its form token is derived from it with this
process's secret, so it costs no room and another site can forge neither. Signing out
ends a session; so does restarting the server, which is also the only way to change the
token, so a token change ends every session. The cookie therefore proves nothing on its
own: a copy taken before sign-out, or one from another server, opens nothing.

:class:`Attempts` slows a guesser: after ``MAX_FAILURES`` wrong tokens from one client
(sign-in form or bearer header) within ``FAILURE_WINDOW_S`` seconds, that client's next
tries are refused, even with the right token, until the oldest failure is that old.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import Scope

#: How long a sign-in lasts (and the cookie's Max-Age).
SESSION_SECONDS = 7 * 24 * 3600
#: Sessions kept at once; the least recently used goes first beyond it.
MAX_SESSIONS = 10_000
#: Wrong tokens one client may send within FAILURE_WINDOW_S before it must wait.
MAX_FAILURES = 5
FAILURE_WINDOW_S = 60.0
#: Clients whose failures are remembered at once (the oldest are forgotten first).
MAX_CLIENTS = 10_000
#: The shortest token a server that listens beyond this machine accepts.
MIN_TOKEN_CHARS = 16
#: What a session or visitor id is made of (``secrets.token_urlsafe(32)``).
_ID = re.compile(r"[A-Za-z0-9_-]{43}")


def cookie_name(port: int | None) -> str:
    """The sign-in cookie's name: one per port the server listens on, so two servers on one
    host keep apart (browsers do not separate cookies by port). The port is the socket's,
    not the one in the Host header, so a reverse proxy in front changes nothing."""
    return f"slm_session_{port or 0}"


@dataclass(frozen=True, slots=True)
class Session:
    """One browser's session: ``csrf`` is the form token its pages carry."""

    id: str
    csrf: str
    signed_in: bool
    expires: float


class Sessions:
    """The sessions of one server process (thread-safe)."""

    def __init__(
        self,
        seconds: float = SESSION_SECONDS,
        limit: int = MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds, self.limit, self.clock = seconds, limit, clock
        self._lock = threading.Lock()
        self._secret = secrets.token_bytes(32)
        # Keyed by a digest of the id, so no lookup compares the secret itself.
        self._held: OrderedDict[str, Session] = OrderedDict()

    def start(self, *, signed_in: bool) -> Session:
        """A new session with a fresh id and form token."""
        session = Session(
            id=secrets.token_urlsafe(32),
            csrf=secrets.token_urlsafe(32),
            signed_in=signed_in,
            expires=self.clock() + self.seconds,
        )
        with self._lock:
            self._held[_key(session.id)] = session
            while len(self._held) > self.limit:
                self._held.popitem(last=False)
        return session

    def visitor(self) -> Session:
        """A new browser's session on a server without a token (nothing is held)."""
        found = self.visitor_of(secrets.token_urlsafe(32))
        assert found is not None
        return found

    def visitor_of(self, visitor_id: str) -> Session | None:
        """The session of a browser on a server without a token, from the id its cookie
        gave (None: not an id slm makes). Nothing is held: its form token is an HMAC of its
        id under this process's secret."""
        if not _ID.fullmatch(visitor_id):
            return None
        csrf = hmac.new(self._secret, visitor_id.encode("ascii"), hashlib.sha256).hexdigest()
        return Session(visitor_id, csrf, signed_in=False, expires=self.clock() + self.seconds)

    def find(self, session_id: str) -> Session | None:
        """The live session with this id, or None (unknown, ended or expired)."""
        if not session_id:
            return None
        key = _key(session_id)
        with self._lock:
            session = self._held.get(key)
            if session is None:
                return None
            if session.expires <= self.clock():
                del self._held[key]
                return None
            self._held.move_to_end(key)
            return session

    def end(self, session_id: str) -> None:
        with self._lock:
            self._held.pop(_key(session_id), None)

    def __len__(self) -> int:
        return len(self._held)


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()


class Attempts:
    """Wrong tokens per client, in a sliding window (thread-safe)."""

    def __init__(
        self,
        limit: int = MAX_FAILURES,
        window: float = FAILURE_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit, self.window, self.clock = limit, window, clock
        self._lock = threading.Lock()
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def wait(self, client: str) -> float:
        """Seconds ``client`` must wait before its next try is read (0: go ahead)."""
        now = self.clock()
        with self._lock:
            failures = self._failures.get(client)
            if failures is None:
                return 0.0
            while failures and failures[0] <= now - self.window:
                failures.popleft()
            if not failures:
                del self._failures[client]
                return 0.0
            if len(failures) < self.limit:
                return 0.0
            return failures[0] + self.window - now

    def failed(self, client: str) -> None:
        with self._lock:
            failures = self._failures.setdefault(client, deque(maxlen=self.limit))
            failures.append(self.clock())
            self._failures.move_to_end(client)
            while len(self._failures) > MAX_CLIENTS:
                self._failures.popitem(last=False)


def client_of(scope: Scope) -> str:
    """The address a request came from (the proxy's, behind a reverse proxy)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def server_port(scope: Scope) -> int | None:
    server = scope.get("server")
    return int(server[1]) if server and server[1] is not None else None


def set_cookie_header(scope: Scope, session: Session | None) -> str:
    """The Set-Cookie value that hands ``session`` to the browser (None: removes it)."""
    name = cookie_name(server_port(scope))
    value, age = (session.id, SESSION_SECONDS) if session is not None else ("", 0)
    secure = "; Secure" if _is_https(scope) else ""
    return f"{name}={value}; Max-Age={age}; Path=/; HttpOnly; SameSite=Strict{secure}"


def _is_https(scope: Scope) -> bool:
    """HTTPS to the browser: directly, or at a reverse proxy that says so (the header only
    ever makes the cookie stricter, so trusting it costs nothing)."""
    headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
    forwarded = headers.get("x-forwarded-proto", b"").split(b",")[0].strip().lower()
    return scope.get("scheme") == "https" or forwarded == b"https"
