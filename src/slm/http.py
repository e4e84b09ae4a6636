"""``slm serve``: the REST API, a thin adapter from HTTP to :class:`slm.Memory`.

Every endpoint calls one library method and returns its ``to_dict()``; ``POST /v1/recall``
returns the same score-contract-v2 object as ``slm recall --json``. Request bodies are checked
for shape here (so the OpenAPI document says what is accepted) and for values by the library,
the one place the limits live. Every error is JSON: ``{"error": {"type", "message", "field"}}``.

The profile is chosen per request (``X-SLM-Profile`` header or ``profile`` query parameter);
each profile gets its own :class:`Memory` over the same store, so no request sees another
profile's memories. Without ``SLM_API_TOKEN`` the server only binds a loopback address and
only answers requests addressed to one, so a web page cannot reach it by DNS rebinding.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from slm import __version__, validate
from slm.embed import Embedder
from slm.engine import Memory
from slm.errors import ConfigError, InvalidInput, NotFound, SlmError, install_hint, outcome
from slm.settings import Settings
from slm.store import Location

try:
    import uvicorn
    from fastapi import Depends, FastAPI, Header, Query, Request
    from fastapi import Path as PathParam
    from fastapi.exceptions import RequestValidationError
    from fastapi.openapi.docs import get_swagger_ui_html
    from fastapi.responses import HTMLResponse, JSONResponse, Response
    from starlette.exceptions import HTTPException
    from starlette.requests import cookie_parser
    from starlette.staticfiles import StaticFiles
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
    from swagger_ui_bundle import swagger_ui_path

    from slm.http_models import (
        FeedbackIn,
        Forgotten,
        MemoryBatch,
        MemoryList,
        MemoryOut,
        RecallIn,
        RecallOut,
        RememberBody,
        UpdateIn,
        ok,
    )
    from slm.web.pages import (
        MAX_FORM_BYTES,
        add_pages,
        cookie_name,
        error_page,
        login_page,
        session_value,
    )
except ImportError as exc:  # the extra is optional; say which one instead of a traceback
    raise ConfigError(f"slm serve needs the server extra: {install_hint('server')}") from exc

log = logging.getLogger("slm.http")

MAX_BODY_BYTES = 1024 * 1024
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_PROFILE = f"^{validate.PROFILE_PATTERN.pattern}$"
_MEMORY_ID = "^[0-9a-f]{16}$"


# -- profiles --------------------------------------------------------------------------------


class Profiles:
    """One open :class:`Memory` per profile, all over one store file and one embedder.

    At most ``limit`` stay open; the least recently used idle one is closed to make room,
    and one evicted while a request still uses it is closed when that request ends.
    """

    def __init__(self, location: Location, settings: Settings, limit: int = 32) -> None:
        self.location, self.settings, self.limit = location, settings, limit
        self._lock = threading.Lock()
        self._open: OrderedDict[str, Memory] = OrderedDict()
        self._users: dict[int, int] = {}
        self._embedder: Embedder | None = None

    @contextmanager
    def lease(self, profile: str) -> Iterator[Memory]:
        memory = self._acquire(profile)
        try:
            yield memory
        finally:
            self._release(memory)

    def _acquire(self, profile: str) -> Memory:
        with self._lock:
            memory = self._open.get(profile)
            if memory is None:
                memory = Memory(
                    self.location,
                    profile=profile,
                    settings=self.settings,
                    embedder=self._embedder,
                )
                self._embedder = memory.embedder  # loading the model once is enough
                self._open[profile] = memory
                self._evict()
            self._open.move_to_end(profile)
            self._users[id(memory)] = self._users.get(id(memory), 0) + 1
            return memory

    def _release(self, memory: Memory) -> None:
        with self._lock:
            left = self._users[id(memory)] = self._users[id(memory)] - 1
            if left == 0:
                del self._users[id(memory)]
                if self._open.get(memory.profile) is not memory:
                    memory.close()

    def _evict(self) -> None:
        for profile in list(self._open)[: max(0, len(self._open) - self.limit)]:
            memory = self._open.pop(profile)
            if id(memory) not in self._users:
                memory.close()

    def close(self) -> None:
        with self._lock:
            for memory in self._open.values():
                memory.close()
            self._open.clear()


def _profile(
    request: Request,
    header: Annotated[
        str | None,
        Header(alias="X-SLM-Profile", pattern=_PROFILE, description="Profile of this request."),
    ] = None,
    query: Annotated[
        str | None,
        Query(alias="profile", pattern=_PROFILE, description="Profile, if not in the header."),
    ] = None,
) -> str:
    if header is not None and query is not None and header != query:
        raise InvalidInput(
            "profile: the X-SLM-Profile header and ?profile= disagree", field="profile"
        )
    chosen: str = header or query or request.app.state.default_profile
    return validate.profile(chosen)


def _memory(request: Request, profile: Annotated[str, Depends(_profile)]) -> Iterator[Memory]:
    profiles: Profiles = request.app.state.profiles
    with profiles.lease(profile) as memory:
        yield memory


Mem = Annotated[Memory, Depends(_memory)]


# -- the app ---------------------------------------------------------------------------------


def create_app(
    location: Location | Path,
    *,
    settings: Settings | None = None,
    default_profile: str = "default",
    token: str | None = None,
    loopback_only: bool = True,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> ASGIApp:
    """The ASGI app over the store at ``location`` (a SQLite file's path will do); close it
    by shutting the app down."""
    if not isinstance(location, Location):
        location = Location(path=Path(location))
    profiles = Profiles(location, settings if settings is not None else Settings.from_env())
    with profiles.lease(validate.profile(default_profile)):
        pass  # a store or model that cannot open fails here, before the server listens

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        profiles.close()

    app = FastAPI(
        title="slm",
        version=__version__,
        summary="Local-first memory for AI agents: store what matters, recall it ranked.",
        docs_url=None,  # FastAPI's page loads its scripts from a CDN: slm serves its own
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.profiles = profiles
    app.state.default_profile = validate.profile(default_profile)
    _add_routes(app)
    _add_docs(app)
    add_pages(app, token)
    _add_error_handlers(app)
    return Guard(app, token=token, loopback_only=loopback_only, max_body_bytes=max_body_bytes)


def _add_routes(app: FastAPI) -> None:
    @app.post("/v1/memories", status_code=201, responses={**ok(None, 201), 200: {}})
    def remember(body: RememberBody, memory: Mem) -> JSONResponse:
        """Store one memory (an object) or a batch (``{"memories": [...]}``), all or nothing.

        Identical content in a profile is stored once: the existing memory comes back. Each
        memory returned says whether this request stored it (``created``); the status is 201
        when at least one was stored, 200 when all were already there.
        """
        items = body.memories if isinstance(body, MemoryBatch) else [body]
        done = memory.store_many([i.model_dump(exclude_unset=True) for i in items])
        out = [d.to_dict() for d in done]
        data = {"memories": out} if isinstance(body, MemoryBatch) else out[0]
        return JSONResponse(data, status_code=201 if any(d.created for d in done) else 200)

    @app.post("/v1/recall", responses=ok(RecallOut))
    def recall(body: RecallIn, memory: Mem) -> JSONResponse:
        """The memories most relevant to the query, as a score contract v2 response."""
        options = body.model_dump(exclude={"query"})
        return JSONResponse(memory.recall(body.query, **options).to_dict())

    @app.get("/v1/memories/{memory_id}", responses=ok(MemoryOut))
    def get(memory_id: Annotated[str, PathParam(pattern=_MEMORY_ID)], memory: Mem) -> JSONResponse:
        """One memory by id."""
        return JSONResponse(memory.get(memory_id).to_dict())

    @app.get("/v1/memories", responses=ok(MemoryList))
    def list_memories(
        memory: Mem,
        limit: Annotated[int, Query(ge=1, le=validate.MAX_LIST_LIMIT)] = 20,
        offset: Annotated[int, Query(ge=0, le=validate.MAX_OFFSET)] = 0,
        source: str | None = None,
        tag: Annotated[list[str], Query(description="Only memories with this tag.")] = [],  # noqa: B006
        text: Annotated[str | None, Query(description="Only memories containing it.")] = None,
    ) -> JSONResponse:
        """Memories, most recently recorded first."""
        records = memory.list(limit, offset, source=source, tags=tag, text=text)
        return JSONResponse({"memories": [r.to_dict() for r in records]})

    @app.delete("/v1/memories/{memory_id}", responses=ok(Forgotten))
    def forget(
        memory_id: Annotated[str, PathParam(pattern=_MEMORY_ID)], memory: Mem
    ) -> JSONResponse:
        """Remove one memory from every index."""
        if not memory.forget([memory_id]):
            raise NotFound(f"no memory with id {memory_id} in profile {memory.profile!r}")
        return JSONResponse({"forgotten": [memory_id]})

    @app.delete("/v1/memories/{memory_id}/replaced-by/{newer_id}", responses=ok(None))
    def unlink(
        memory_id: Annotated[str, PathParam(pattern=_MEMORY_ID)],
        newer_id: Annotated[str, PathParam(pattern=_MEMORY_ID)],
        memory: Mem,
    ) -> JSONResponse:
        """Undo a link: the newer memory does not replace this one, which holds again."""
        memory.unlink(memory_id, newer_id)
        return JSONResponse({"unlinked": {"older": memory_id, "newer": newer_id}})

    @app.patch("/v1/memories/{memory_id}", status_code=201, responses={**ok(None, 201), 200: {}})
    def update(
        memory_id: Annotated[str, PathParam(pattern=_MEMORY_ID)], body: UpdateIn, memory: Mem
    ) -> JSONResponse:
        """Replace a memory that is no longer true: the body is stored as a new memory that
        supersedes it (the old one stays readable, with ``valid_to`` and ``superseded_by``).
        201 with the new memory; 200 when identical content was already stored."""
        done = memory.update(memory_id, **body.model_dump(exclude_unset=True))
        return JSONResponse(done.to_dict(), status_code=201 if done.created else 200)

    @app.post("/v1/feedback", status_code=201, responses=ok(None, 201))
    def feedback(body: FeedbackIn, memory: Mem) -> JSONResponse:
        """Record whether a memory was useful, for the recall ``query_id`` names; with the
        reranker and learning on it trains the profile's ranker (docs/learning.md)."""
        report = memory.feedback_report(body.memory_id, useful=body.useful, query_id=body.query_id)
        return JSONResponse(report, status_code=201)

    @app.get("/v1/feedback", responses=ok(None))
    def list_feedback(
        memory: Mem,
        limit: Annotated[int, Query(ge=1, le=validate.MAX_LIST_LIMIT)] = 20,
        offset: Annotated[int, Query(ge=0, le=validate.MAX_OFFSET)] = 0,
    ) -> JSONResponse:
        """The profile's feedback, newest first."""
        events = memory.feedback_events(limit, offset)
        return JSONResponse({"feedback": [e.to_dict() for e in events]})

    @app.delete("/v1/feedback", responses=ok(None))
    def reset_feedback(memory: Mem) -> JSONResponse:
        """Forget the profile's feedback, its recall log and its learned ranker."""
        return JSONResponse({"forgotten": memory.reset_feedback()})

    @app.get("/v1/health", responses=ok(None))
    def health(memory: Mem) -> JSONResponse:
        """Store, embedder and channel health, and the profile's memory count."""
        return JSONResponse(memory.health())


def _add_docs(app: FastAPI) -> None:
    """Interactive API documentation at ``/docs``, from the OpenAPI document, with Swagger
    UI's files served from the ``swagger-ui-bundle`` package (nothing loaded from the web)."""
    app.mount("/docs/assets", StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="slm API",
            swagger_js_url="/docs/assets/swagger-ui-bundle.js",
            swagger_css_url="/docs/assets/swagger-ui.css",
            swagger_favicon_url="/docs/assets/favicon-32x32.png",
        )


# -- errors ----------------------------------------------------------------------------------


def error_response(
    status: int, kind: str, message: str, field: str | None = None, **headers: str
) -> JSONResponse:
    body = {"error": {"type": kind, "message": message, "field": field}}
    return JSONResponse(body, status_code=status, headers=headers or None)


_HTTP_KINDS = {400: "invalid_input", 404: "not_found", 405: "method_not_allowed"}
#: Library argument names that a request calls otherwise.
_FIELD_ALIASES = {"items": "memories"}


def library_field(exc: InvalidInput) -> str | None:
    """The request field a library error is about: the argument it names, under
    ``memories[i]`` when it is about one item of a batch."""
    field = _FIELD_ALIASES.get(exc.field, exc.field) if exc.field else None
    if exc.index is None:
        return field
    return f"memories[{exc.index}]" + (f".{field}" if field else "")


def _loc_field(loc: tuple[Any, ...]) -> str:
    """``("body", "batch", "memories", 2, "content")`` -> ``memories[2].content``."""
    parts = [p for p in loc[1:] if p not in ("one", "batch")] if loc[0] == "body" else loc[1:]
    if loc[0] == "path":
        parts = ["id"]
    elif loc[0] == "header":
        parts = ["X-SLM-Profile"]
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or str(loc[0])


def _add_error_handlers(app: FastAPI) -> None:
    async def invalid_request(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            detail = first.get("ctx", {}).get("error", "")
            message = f"body is not valid JSON: {detail} at position {first['loc'][-1]}"
            return error_response(400, "invalid_input", message, "body")
        field = _loc_field(tuple(first.get("loc", ("body",))))
        return error_response(400, "invalid_input", f"{field}: {first['msg']}", field)

    async def library_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, SlmError)
        result = outcome(exc)
        if result.http_status >= 500:
            log.error("%s: %s", type(exc).__name__, exc)
        field = library_field(exc) if isinstance(exc, InvalidInput) else None
        return error_response(result.http_status, result.kind, str(exc), field)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        status = exc.status_code
        if _is_page(request.url.path):
            return error_page(request, status, str(exc.detail))
        kind = _HTTP_KINDS.get(status, "http_error")
        # FastAPI raises a bare 400 only when it cannot parse the body at all.
        field = "body" if status == 400 else None
        return error_response(status, kind, str(exc.detail), field, **(exc.headers or {}))

    async def crash(request: Request, exc: Exception) -> Response:
        log.exception("internal error", exc_info=exc)
        message = f"internal error: {type(exc).__name__}"
        if _is_page(request.url.path):
            return error_page(request, 500, message)
        return error_response(500, "internal_error", message)

    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(SlmError, library_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, crash)


# -- transport guard: host, token, body size -----------------------------------------------


class Guard:
    """ASGI middleware applied before routing: checks the Host, the token and the body size.

    The body is read here (at most ``max_body_bytes``) so an oversized request is refused with
    413 before any parsing, whether or not it announced its length.
    """

    def __init__(
        self, app: ASGIApp, *, token: str | None, loopback_only: bool, max_body_bytes: int
    ) -> None:
        self.app = app
        self.token = token.encode("utf-8") if token else None
        self.loopback_only = loopback_only
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        page = _is_page(scope["path"])
        limit = max(self.max_body_bytes, MAX_FORM_BYTES) if page else self.max_body_bytes
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
        await self.app(scope, _replay(body or b"", receive), send)

    def _refusal(self, scope: Scope, headers: dict[str, bytes]) -> Response | None:
        if self.loopback_only and _host_name(headers.get("host", b"")) not in _LOOPBACK_NAMES:
            return error_response(400, "invalid_host", "this server only answers loopback names")
        path = scope["path"]
        if _is_page(path) and _from_another_site(headers):
            # A page loads nothing from another site's pages (a search writes to the recall
            # log and costs an embedding); following a link to it is still fine.
            return error_page(None, 403, "this page cannot be loaded from another site")
        if self.token is not None and path != "/openapi.json" and not _is_open_page(path):
            given = headers.get("authorization", b"")
            scheme, _, value = given.partition(b" ")
            bearer = scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), self.token)
            if not bearer and _is_page(path):
                port = scope.get("server", (None, None))[1]
                session = _cookie(headers, cookie_name(port))
                if not hmac.compare_digest(session, session_value(self.token)):
                    query = scope.get("query_string", b"").decode("latin-1")
                    return login_page(None, target=path + (f"?{query}" if query else ""))
            elif not bearer:
                return error_response(
                    401,
                    "unauthorized",
                    "send Authorization: Bearer <SLM_API_TOKEN>",
                    **{"WWW-Authenticate": "Bearer"},
                )
        length = headers.get("content-length", b"0")
        limit = max(self.max_body_bytes, MAX_FORM_BYTES) if _is_page(path) else self.max_body_bytes
        if length.isdigit() and int(length) > limit:
            return _refused(_is_page(path), 413, "too_large", f"request body over {limit} bytes")
        return None


def _refused(
    page: bool, status: int, kind: str, message: str, field: str | None = None
) -> Response:
    """A refusal as the asker reads it: a page for the web page, JSON for the API."""
    return (
        error_page(None, status, message) if page else error_response(status, kind, message, field)
    )


def _from_another_site(headers: dict[str, bytes]) -> bool:
    """Fetched by another site's page, not navigated to (Fetch Metadata headers)."""
    site = headers.get("sec-fetch-site", b"").lower()
    mode = headers.get("sec-fetch-mode", b"").lower()
    return site == b"cross-site" and mode != b"navigate"


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


def _is_page(path: str) -> bool:
    """The web page's addresses (slm.web): ``/`` and ``/ui/...``."""
    return path == "/" or path == "/ui" or path.startswith("/ui/")


def _is_open_page(path: str) -> bool:
    """Pages anyone may load: the sign-in form and the stylesheet."""
    return path == "/ui/login" or path.startswith("/ui/static/")


def _is_form(content_type: bytes) -> bool:
    kind = content_type.decode("latin-1").partition(";")[0].strip().lower()
    return kind == "application/x-www-form-urlencoded"


def _cookie(headers: dict[str, bytes], name: str) -> bytes:
    """The value of cookie ``name`` in the request (empty when absent); other cookies on
    the host, however malformed, do not hide it."""
    value = cookie_parser(headers.get("cookie", b"").decode("latin-1")).get(name, "")
    return value.encode("utf-8", "replace")


def _host_name(value: bytes) -> str:
    host = value.decode("latin-1").strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


# -- running ---------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve(
    *,
    host: str,
    port: int,
    location: Location,
    default_profile: str = "default",
    token: str | None = None,
    log_level: Literal["warning", "info", "debug"] = "info",
    settings: Settings | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Run the API until interrupted; refuse a non-loopback host without a token. Once it
    listens, ``ready`` is called with the page's address."""
    token = token.strip() if token else None
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to serve on {host} without a token: set SLM_API_TOKEN "
            "(clients then send 'Authorization: Bearer <token>') or bind 127.0.0.1"
        )
    app = create_app(
        location,
        settings=settings,
        default_profile=default_profile,
        token=token,
        loopback_only=not token,
    )
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, access_log=False, server_header=False
    )
    server = uvicorn.Server(config)
    if ready is not None:
        threading.Thread(target=_announce, args=(server, host, ready), daemon=True).start()
    with contextlib.suppress(KeyboardInterrupt):  # stopped by the user: a clean exit
        server.run()
    if not server.started:
        raise ConfigError(f"the server could not start on {host}:{port} (is the port in use?)")


def _announce(server: uvicorn.Server, host: str, ready: Callable[[str], None]) -> None:
    """Call ``ready`` with the address once ``server`` listens (its port may be any)."""
    while not server.started:
        if server.should_exit:
            return
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    name = f"[{host}]" if ":" in host else host
    ready(f"http://{name}:{port}/")
