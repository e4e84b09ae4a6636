"""What ``slm serve`` checks before routing a request: who is asking, from where, and how much.

- **Host**: without a token the server answers only loopback names (no DNS rebinding).
- **Another site**: a browser request another site's page caused (``Sec-Fetch-Site``
  cross-site or same-site; else, for a write, an ``Origin`` that is not this server) is
  refused on every route. Following a link from elsewhere to a page or to ``/docs`` gets a
  page that does nothing but offer the same address to open from here.
- **Token**: the API needs ``Authorization: Bearer <token>``; the page and ``/docs`` take a
  sign-in session instead (:mod:`slm.server.web.sessions`). A client that sends wrong tokens too
  often is refused with 429 for a while, right token or not.
- **Session**: a session is made only by a sign-in; without a token each browser gets a
  visitor's id at its first page, which the server does not keep. Either gives the form
  token the page's forms must carry.
- **Body**: read here, at most the limit, so an oversized request is refused with 413
  before any parsing; a body must be JSON (or the page's own form posts).
"""

from __future__ import annotations

import hmac
import math
from urllib.parse import urlsplit

from fastapi.responses import JSONResponse, Response
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from slm.server.web.pages import MAX_FORM_BYTES, elsewhere_page, error_page, login_page
from slm.server.web.sessions import (
    Attempts,
    Session,
    Sessions,
    client_of,
    cookie_name,
    server_port,
    set_cookie_header,
)

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_FOREIGN_SITES = frozenset({b"cross-site", b"same-site"})


def error_response(
    status: int, kind: str, message: str, field: str | None = None, **headers: str
) -> JSONResponse:
    body = {"error": {"type": kind, "message": message, "field": field}}
    return JSONResponse(body, status_code=status, headers=headers or None)


class Guard:
    """ASGI middleware applied before routing (see the module's description)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        loopback_only: bool,
        max_body_bytes: int,
        sessions: Sessions,
        attempts: Attempts,
    ) -> None:
        self.app = app
        self.token = token.encode("utf-8") if token else None
        self.loopback_only = loopback_only
        self.max_body_bytes = max_body_bytes
        self.sessions, self.attempts = sessions, attempts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        page = is_browser_route(scope["path"])
        limit = max(self.max_body_bytes, MAX_FORM_BYTES) if page else self.max_body_bytes
        refusal = self._refusal(scope, headers, page, limit)
        body: bytes | None = b""
        if refusal is None:
            body = await _read_body(receive, limit)
            if body is None:
                refusal = _refused(page, 413, "too_large", f"request body over {limit} bytes")
            elif (
                body
                and not _is_json(headers.get("content-type", b""))
                and not (page and _is_form(headers.get("content-type", b"")))
            ):
                # Also what keeps a web page's form post (text/plain) from being read as JSON.
                refusal = _refused(
                    page,
                    415,
                    "unsupported_media_type",
                    "the body must be JSON: send Content-Type: application/json",
                    "body",
                )
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        fresh = page and not scope["path"].startswith(("/ui/static/", "/docs/assets/"))
        if fresh and self.token is None and "session" not in scope.setdefault("state", {}):
            # No token, so no sign-in: each browser gets a visitor's id for its form
            # token, held by nothing here.
            session = self.sessions.visitor()
            scope["state"]["session"] = session
            send = _with_cookie(send, set_cookie_header(scope, session))
        await self.app(scope, _replay(body or b"", receive), send)

    def _refusal(
        self, scope: Scope, headers: dict[str, bytes], page: bool, limit: int
    ) -> Response | None:
        path = scope["path"]
        if self.loopback_only and _host_name(headers.get("host", b"")) not in _LOOPBACK_NAMES:
            return error_response(400, "invalid_host", "this server only answers loopback names")
        foreign = _from_another_site(scope, headers)
        if foreign is not None:
            if page and foreign == "link":
                return elsewhere_page(_target(scope))
            message = "a request caused by another site's page is refused"
            return _refused(page, 403, "cross_site", message)
        session = self._session(scope, headers) if page else None
        if session is not None:
            scope.setdefault("state", {})["session"] = session
        if self.token is not None and path != "/openapi.json" and not is_open_page(path):
            if session is not None and session.signed_in:
                pass
            elif "authorization" in headers:
                refused = self._bearer(scope, headers["authorization"], page)
                if refused is not None:
                    return refused
            elif page:
                return login_page(None, target=_target(scope))
            else:
                return error_response(
                    401,
                    "unauthorized",
                    "send Authorization: Bearer <SLM_API_TOKEN>",
                    **{"WWW-Authenticate": "Bearer"},
                )
        length = headers.get("content-length", b"0")
        if length.isdigit() and int(length) > limit:
            return _refused(page, 413, "too_large", f"request body over {limit} bytes")
        return None

    def _session(self, scope: Scope, headers: dict[str, bytes]) -> Session | None:
        value = cookie_parser(headers.get("cookie", b"").decode("latin-1"))
        given = value.get(cookie_name(server_port(scope)), "")
        found = self.sessions.find(given)
        if found is None and self.token is None and given:
            return self.sessions.visitor_of(given)  # None when not one slm could have made
        return found

    def _bearer(self, scope: Scope, given: bytes, page: bool) -> Response | None:
        """None when ``given`` carries the token; else the refusal (401, or 429 for a client
        that has guessed too often)."""
        client = client_of(scope)
        wait = self.attempts.wait(client)
        if wait > 0:
            return too_many(page, wait)
        assert self.token is not None
        scheme, _, value = given.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), self.token):
            return None
        self.attempts.failed(client)
        return error_response(
            401,
            "unauthorized",
            "wrong token: send Authorization: Bearer <SLM_API_TOKEN>",
            **{"WWW-Authenticate": "Bearer"},
        )


def too_many(page: bool, wait: float) -> Response:
    """The answer to a client that sent too many wrong tokens."""
    seconds = max(1, math.ceil(wait))
    message = f"too many wrong tokens from this address: try again in {seconds} s"
    response = _refused(page, 429, "too_many_attempts", message)
    response.headers["Retry-After"] = str(seconds)
    return response


def _with_cookie(send: Send, cookie: str) -> Send:
    """``send`` that hands the browser ``cookie``, unless the response sets it itself (a
    sign-in replaces the session it started with)."""
    prefix = cookie.partition("=")[0].encode() + b"="

    async def sending(message: Message) -> None:
        headers = message.get("headers", [])
        if message["type"] == "http.response.start" and not any(
            k.lower() == b"set-cookie" and v.startswith(prefix) for k, v in headers
        ):
            message = {
                **message,
                "headers": [*message.get("headers", []), (b"set-cookie", cookie.encode())],
            }
        await send(message)

    return sending


def _target(scope: Scope) -> str:
    query = scope.get("query_string", b"").decode("latin-1")
    return str(scope["path"]) + (f"?{query}" if query else "")


def _refused(
    page: bool, status: int, kind: str, message: str, field: str | None = None
) -> Response:
    """A refusal as the asker reads it: a page for a browser route, JSON for the API."""
    return (
        error_page(None, status, message) if page else error_response(status, kind, message, field)
    )


def _from_another_site(scope: Scope, headers: dict[str, bytes]) -> str | None:
    """``"link"`` for a top-level visit another site led to, ``"request"`` for anything else
    another site's page caused, None for this site, the user, or a program."""
    site = headers.get("sec-fetch-site", b"").lower()
    if site in _FOREIGN_SITES:
        navigate = headers.get("sec-fetch-mode", b"").lower() == b"navigate"
        document = headers.get("sec-fetch-dest", b"document").lower() == b"document"
        visit = scope["method"] in ("GET", "HEAD") and navigate and document
        return "link" if visit else "request"
    if site or scope["method"] in ("GET", "HEAD", "OPTIONS"):
        return None
    # A browser without Fetch Metadata: a write must come from this server's own origin.
    origin = headers.get("origin", b"").decode("latin-1").strip().lower()
    if not origin:
        return None
    host = headers.get("host", b"").decode("latin-1").strip().lower()
    return None if urlsplit(origin).netloc == host else "request"


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or ``None`` as soon as it passes ``limit`` bytes."""
    body = b""
    while True:
        message = await receive()
        body += bytes(message.get("body", b""))
        if len(body) > limit:
            return None
        if message["type"] != "http.request" or not message.get("more_body", False):
            return body


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _is_json(content_type: bytes) -> bool:
    """``application/json`` or a ``+json`` type, with any parameters."""
    kind = content_type.decode("latin-1").partition(";")[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


def is_page(path: str) -> bool:
    """The web page's addresses (slm.server.web): ``/`` and ``/ui/...``."""
    return path == "/" or path == "/ui" or path.startswith("/ui/")


def is_browser_route(path: str) -> bool:
    """Addresses a person opens in a browser: the page and the API reference."""
    return is_page(path) or path == "/docs" or path.startswith("/docs/")


def is_open_page(path: str) -> bool:
    """Pages anyone may load: the sign-in form and the stylesheet."""
    return path == "/ui/login" or path.startswith("/ui/static/")


def _is_form(content_type: bytes) -> bool:
    kind = content_type.decode("latin-1").partition(";")[0].strip().lower()
    return kind == "application/x-www-form-urlencoded"


def _host_name(value: bytes) -> str:
    host = value.decode("latin-1").strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host
