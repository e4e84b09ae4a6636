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
import ipaddress
import logging
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from slm import __version__, validate
from slm.engine import Memory
from slm.errors import ConfigError, InvalidInput, NotFound, SlmError, install_hint, outcome
from slm.inputs import scope as owners
from slm.models import RecallRequest
from slm.profiles import delete, profiles, require
from slm.settings import Settings
from slm.store import Location

try:
    import uvicorn
    from fastapi import Depends, FastAPI, Header, Query, Request
    from fastapi import Path as PathParam
    from fastapi.dependencies.models import Dependant
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from fastapi.routing import APIRoute
    from starlette.exceptions import HTTPException
    from starlette.types import ASGIApp

    from slm.server.bodies import (
        OWNER_FIELDS,
        ConversationIn,
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
    from slm.server.guard import Guard, error_response, is_page
    from slm.server.pool import Profiles
    from slm.server.web.docs import add_docs
    from slm.server.web.pages import add_pages, error_page
    from slm.server.web.sessions import MIN_TOKEN_CHARS, Attempts, Sessions
except ImportError as exc:  # the extra is optional; say which one instead of a traceback
    raise ConfigError(f"slm serve needs the server extra: {install_hint('server')}") from exc

log = logging.getLogger("slm.server.rest")

MAX_BODY_BYTES = 1024 * 1024
_PROFILE = f"^{validate.PROFILE_PATTERN.pattern}$"
_MEMORY_ID = "^[0-9a-f]{16}$"


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


def _owner(
    request: Request,
    memory: Mem,
    user_id: Annotated[str | None, Query(description="Only this user's memories.")] = None,
    agent_id: Annotated[str | None, Query(description="Only this agent's memories.")] = None,
    run_id: Annotated[str | None, Query(description="Only this run's memories.")] = None,
) -> dict[str, Any]:
    """Whose memories a request reads or forgets: ``user_id``, ``agent_id``, ``run_id`` and
    the store's other scope keys (``?tenant=acme``), as text, in the query string."""
    keys = memory.settings.scope_keys
    other = {k: v for k, v in request.query_params.items() if owners.is_scope_key(k, keys)}
    named = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
    return owners.given(keys, **named, scope={k: v for k, v in other.items() if k not in named})


Owned = Annotated[dict[str, Any], Depends(_owner)]


def _known_query(request: Request) -> None:
    """Refuse a query parameter the operation does not take (400 naming it): a misspelt
    filter (``?usr_id=erin``) must never answer as if no filter were given."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.url.path.startswith("/v1/"):
        return
    known, owned = _query_names(route.dependant)
    keys = request.app.state.profiles.settings.scope_keys if owned else ()
    for name in request.query_params:
        if name not in known and not owners.is_scope_key(name, keys):
            raise InvalidInput(
                f"{name}: unknown query parameter; this operation takes "
                f"{', '.join(sorted(known)) or 'none'}",
                field=name,
            )


def _query_names(dependant: Dependant) -> tuple[set[str], bool]:
    """The query parameters an operation takes, and whether it takes an owner (then the
    store's scope keys are parameters too)."""
    names = {param.alias for param in dependant.query_params}
    owned = dependant.call is _owner
    for sub in dependant.dependencies:
        more, sub_owned = _query_names(sub)
        names |= more
        owned = owned or sub_owned
    return names, owned


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
        dependencies=[Depends(_known_query)],
    )
    app.state.profiles = profiles
    app.state.default_profile = validate.profile(default_profile)
    sessions, attempts = Sessions(), Attempts()
    _add_routes(app)
    add_docs(app)
    add_pages(app, token, sessions, attempts)
    _add_error_handlers(app)
    return Guard(
        app,
        token=token,
        loopback_only=loopback_only,
        max_body_bytes=max_body_bytes,
        sessions=sessions,
        attempts=attempts,
    )


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

    @app.post("/v1/conversations", status_code=201, responses={**ok(None, 201), 200: {}})
    def remember_conversation(body: ConversationIn, memory: Mem) -> JSONResponse:
        """Store a chat conversation as it is (OpenAI or Anthropic message shape): one memory
        per message, with its speaker, role, session and time, and the ``metadata`` and owner
        (``user_id``...) given; all or nothing. System messages are skipped and counted
        (``system_skipped``) unless ``system`` is ``keep``."""
        given = body.model_dump(exclude_none=True, exclude={"system", "metadata", *OWNER_FIELDS})
        owner = {name: getattr(body, name) for name in OWNER_FIELDS}
        done = memory.remember_conversation(
            given, system=body.system, metadata=body.metadata, **owner
        )
        return JSONResponse(
            done.to_dict(), status_code=201 if any(d.created for d in done) else 200
        )

    @app.post("/v1/recall", responses=ok(RecallOut))
    def recall(body: RecallIn, memory: Mem) -> JSONResponse:
        """The memories most relevant to the query, as a score contract v2 response."""
        response = memory.recall_request(RecallRequest(**body.model_dump()))
        if not response.results:
            require(memory)  # an empty answer from a mistyped profile says so
        return JSONResponse(response.to_dict())

    @app.get("/v1/memories/{memory_id}", responses=ok(MemoryOut))
    def get(memory_id: Annotated[str, PathParam(pattern=_MEMORY_ID)], memory: Mem) -> JSONResponse:
        """One memory by id."""
        try:
            return JSONResponse(memory.get(memory_id).to_dict())
        except NotFound:
            require(memory)
            raise

    @app.get("/v1/memories/{memory_id}/history", responses=ok(None))
    def history(
        memory_id: Annotated[str, PathParam(pattern=_MEMORY_ID)], memory: Mem
    ) -> JSONResponse:
        """What the memory replaced and what replaced it, with times and whether each link
        was stated (supersedes, update) or probable (found at write time); ``chain`` and
        ``current`` follow stated links to the version that holds now."""
        try:
            return JSONResponse(memory.history(memory_id).to_dict())
        except NotFound:
            require(memory)
            raise

    @app.get("/v1/memories", responses=ok(MemoryList))
    def list_memories(
        memory: Mem,
        owner: Owned,
        limit: Annotated[int, Query(ge=1, le=validate.MAX_LIST_LIMIT)] = 20,
        offset: Annotated[int, Query(ge=0, le=validate.MAX_OFFSET)] = 0,
        source: str | None = None,
        tag: Annotated[list[str], Query(description="Only memories with this tag.")] = [],  # noqa: B006
        text: Annotated[str | None, Query(description="Only memories containing it.")] = None,
        metadata: Annotated[
            str | None,
            Query(description='A metadata filter as JSON: {"user_id": "u7", "session": [3, 4]}.'),
        ] = None,
    ) -> JSONResponse:
        """Memories, most recently recorded first; with ``user_id`` (``agent_id``,
        ``run_id``, the store's other scope keys), only that owner's."""
        chosen = owners.into_filter(metadata, owner)
        records = memory.list(limit, offset, source=source, tags=tag, text=text, metadata=chosen)
        if not records:
            require(memory)
        return JSONResponse({"memories": [r.to_dict() for r in records]})

    @app.delete("/v1/memories/{memory_id}", responses=ok(Forgotten))
    def forget(
        memory_id: Annotated[str, PathParam(pattern=_MEMORY_ID)], memory: Mem
    ) -> JSONResponse:
        """Remove one memory from every index (404 when the profile does not hold it)."""
        return JSONResponse({"forgotten": memory.forget([memory_id])})

    @app.delete("/v1/memories", responses=ok(None))
    def forget_matching(
        memory: Mem,
        owner: Owned,
        metadata: Annotated[
            str | None,
            Query(description="Forget the memories this metadata filter matches, as JSON."),
        ] = None,
        all: Annotated[
            bool, Query(description="Forget every memory of the profile (no filter given).")
        ] = False,
        dry_run: Annotated[bool, Query(description="Only count what would be forgotten.")] = False,
    ) -> JSONResponse:
        """Forget every memory of an owner (``?user_id=alice``) or metadata filter, or with
        ``?all=true`` of the whole profile: chosen and removed at once, from every index.
        No filter and no ``all`` is a 400. ``?dry_run=true`` answers the count and forgets
        nothing."""
        chosen = owners.into_filter(metadata, owner) or None
        ids = memory.forget(metadata=chosen, all=all, dry_run=dry_run)
        if dry_run:
            return JSONResponse({"dry_run": True, "count": len(ids), "ids": ids})
        return JSONResponse({"forgotten": ids, "count": len(ids)})

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
        if not events:
            require(memory)
        return JSONResponse({"feedback": [e.to_dict() for e in events]})

    @app.delete("/v1/feedback", responses=ok(None))
    def reset_feedback(memory: Mem) -> JSONResponse:
        """Forget the profile's feedback, its recall log and its learned ranker."""
        return JSONResponse({"forgotten": memory.reset_feedback()})

    @app.get("/v1/profiles", responses=ok(None))
    def list_profiles(request: Request) -> JSONResponse:
        """Every profile of the store that holds memories: how many, and the last write."""
        with request.app.state.profiles.lease(request.app.state.default_profile) as memory:
            return JSONResponse({"profiles": [p.to_dict() for p in profiles(memory)]})

    @app.delete("/v1/profiles/{name}", responses=ok(None))
    def delete_profile(
        request: Request,
        name: Annotated[str, PathParam(pattern=_PROFILE)],
        confirm: Annotated[str, Query(description="The profile's name again.")] = "",
    ) -> JSONResponse:
        """Delete a whole profile: every memory in it, its feedback and its learned ranker.
        ``?confirm=`` must repeat the name, so a stray request deletes nothing."""
        if confirm != name:
            raise InvalidInput(
                f"confirm: deleting profile {name!r} needs ?confirm={name} (nothing was deleted)",
                field="confirm",
            )
        with request.app.state.profiles.lease(name) as memory:
            forgotten = delete(memory)
        return JSONResponse({"deleted": {"profile": name, "forgotten": forgotten}})

    @app.get("/v1/health", responses=ok(None))
    def health(memory: Mem) -> JSONResponse:
        """Store, embedder and channel health, and the profile's memory count."""
        report = memory.health()
        if not report["memories"]:
            require(memory)
        return JSONResponse(report)


# -- errors ----------------------------------------------------------------------------------


_HTTP_KINDS = {400: "invalid_input", 404: "not_found", 405: "method_not_allowed"}
#: Library argument names that a request calls otherwise.
_FIELD_ALIASES = {"items": "memories"}
#: Path parameters as the documented paths name them (``/v1/memories/{id}``).
_PATH_FIELDS = {"memory_id": "id", "newer_id": "newer"}


def library_field(exc: InvalidInput) -> str | None:
    """The request field a library error is about: the argument it names, under
    ``memories[i]`` when it is about one item of a batch (unless it names its item
    itself, as a conversation's ``messages[i].name`` does)."""
    field = _FIELD_ALIASES.get(exc.field, exc.field) if exc.field else None
    if exc.index is None or (field is not None and _PLACED.match(field)):
        return field
    return f"memories[{exc.index}]" + (f".{field}" if field else "")


#: A field that says which item of a list it is about.
_PLACED = re.compile(r"\w+\[\d+\]")


def _loc_field(loc: tuple[Any, ...]) -> str:
    """``("body", "batch", "memories", 2, "content")`` -> ``memories[2].content``."""
    parts = [p for p in loc[1:] if p not in ("one", "batch")] if loc[0] == "body" else loc[1:]
    if loc[0] == "path":
        parts = [_PATH_FIELDS.get(str(loc[-1]), str(loc[-1]))]
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

    async def library_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, SlmError)
        result = outcome(exc)
        if result.http_status >= 500:
            log.error("%s: %s", type(exc).__name__, exc)
        field = library_field(exc) if isinstance(exc, InvalidInput) else None
        message = request.app.state.profiles.public(str(exc))
        return error_response(result.http_status, result.kind, message, field)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        status = exc.status_code
        if is_page(request.url.path):
            return error_page(request, status, str(exc.detail))
        kind = _HTTP_KINDS.get(status, "http_error")
        # FastAPI raises a bare 400 only when it cannot parse the body at all.
        field = "body" if status == 400 else None
        return error_response(status, kind, str(exc.detail), field, **(exc.headers or {}))

    async def crash(request: Request, exc: Exception) -> Response:
        log.exception("internal error", exc_info=exc)
        message = f"internal error: {type(exc).__name__}"
        if is_page(request.url.path):
            return error_page(request, 500, message)
        return error_response(500, "internal_error", message)

    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(SlmError, library_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, crash)


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
    trusted_proxies: str = "",
) -> None:
    """Run the API until interrupted; refuse a non-loopback host without a token. Once it
    listens, ``ready`` is called with the page's address.

    A request's address (what the wrong-token lockout counts) is the peer's own unless it
    is one of ``trusted_proxies`` (comma-separated addresses or networks; none by default),
    whose ``X-Forwarded-For`` and ``X-Forwarded-Proto`` then say the client's: a header any
    client can send is believed only from a proxy the user named."""
    token = token.strip() if token else None
    proxies = _proxies(trusted_proxies)
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to serve on {host} without a token: set SLM_API_TOKEN "
            "(clients then send 'Authorization: Bearer <token>') or bind 127.0.0.1"
        )
    if not is_loopback(host) and token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"refusing to serve on {host} with a token of {len(token)} characters: "
            f"use at least {MIN_TOKEN_CHARS} (python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))' makes one)"
        )
    app = create_app(
        location,
        settings=settings,
        default_profile=default_profile,
        token=token,
        loopback_only=not token,
    )
    try:
        listening = _listen(host, port)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc} (another server on this "
            "port? choose another with --port)"
        ) from None
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        server_header=False,
        proxy_headers=bool(proxies),
        forwarded_allow_ips=proxies or None,
    )
    server = uvicorn.Server(config)
    if ready is not None:
        threading.Thread(target=_announce, args=(server, host, ready), daemon=True).start()
    with listening, contextlib.suppress(KeyboardInterrupt):  # stopped by the user: clean
        server.run(sockets=[listening])
    if not server.started:
        raise ConfigError(f"the server could not start on {host}:{port} (is the port in use?)")


def _proxies(given: str) -> list[str]:
    """The trusted proxies of ``given`` (comma-separated addresses or networks), each
    checked: a value that is neither is one clear error, not a proxy silently ignored."""
    proxies = [part.strip() for part in given.split(",") if part.strip()]
    for proxy in proxies:
        if proxy == "*":  # every peer: only for a server no one but its proxy can reach
            continue
        try:
            ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise ConfigError(
                f"trusted proxy {proxy!r} is not an address or a network "
                "(SLM_TRUSTED_PROXIES / --trusted-proxies: e.g. 127.0.0.1,10.0.0.0/8)"
            ) from None
    return proxies


def _listen(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound here so a busy port is one clear error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host.strip("[]"), port))
        listening.listen(2048)
    except OSError:
        listening.close()
        raise
    return listening


def _announce(server: uvicorn.Server, host: str, ready: Callable[[str], None]) -> None:
    """Call ``ready`` with the address once ``server`` listens (its port may be any)."""
    while not server.started:
        if server.should_exit:
            return
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    name = f"[{host}]" if ":" in host else host
    ready(f"http://{name}:{port}/")
