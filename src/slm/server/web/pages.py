"""The web page: ``slm serve`` also answers ``/`` and ``/ui/...`` with HTML, rendered on the
server from the library's answers (docs/web.md). No script runs in the browser; every
action is a link or a form, so the page works from the keyboard and with any browser.

Each browser has a session (:mod:`slm.server.web.sessions`); the forms that change memory carry
that session's own form token (``csrf``), so another web site cannot submit them in the
user's name. Behind ``SLM_API_TOKEN`` the page asks for the token once; signing in starts a
new session, signing out ends it (:class:`slm.server.guard.Guard` checks it on every request).
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.staticfiles import StaticFiles

from slm import __version__, validate
from slm.contract import abstention_words
from slm.engine import Memory
from slm.errors import InvalidInput, NotFound, SlmError, outcome
from slm.profiles import delete as delete_profile
from slm.profiles import profiles, require
from slm.related import related
from slm.server.web import hook_views, views
from slm.server.web.sessions import Attempts, Session, Sessions, client_of, set_cookie_header

HERE = Path(__file__).parent
TEMPLATES = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
)
#: No script runs on these pages, and nothing but this server's own files loads in them.
HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
#: The most form data one page accepts: a memory of the largest size, URL-encoded (up to
#: nine bytes for one character), fits.
MAX_FORM_BYTES = 5 * 1024 * 1024


def session_of(request: Request | None) -> Session | None:
    """The browser session the guard found or started for this request."""
    if request is None:
        return None
    session = request.scope.get("state", {}).get("session")
    return session if isinstance(session, Session) else None


def render(
    request: Request | None, template: str, status: int = 200, **values: Any
) -> HTMLResponse:
    """``template`` rendered with the page's common values: profile, profiles, the form
    token, an ``url`` helper that keeps the profile, and the version."""
    state = request.app.state if request is not None else None
    profile = values.pop("profile", None) or (state.default_profile if state else "default")
    default = state.default_profile if state else "default"

    def url(path: str, **params: Any) -> str:
        return views.address(path, profile, default, **params)

    def address(path: str, name: str, **params: Any) -> str:
        return views.address(path, name, default, **params)

    html = TEMPLATES.get_template(template).render(
        profile=profile,
        profiles=values.pop("profiles", [profile]),
        counts=values.pop("counts", {}),
        address=address,
        csrf=session.csrf if (session := session_of(request)) else "",
        locked=bool(state and state.token),
        url=url,
        when=views.when,
        link_words=views.link_words,
        owner=views.owner,
        version=__version__,
        **values,
    )
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def login_page(
    request: Request | None, message: str | None = None, status: int = 401, target: str = "/"
) -> Response:
    """The page that asks for the API token (also what a page request without it gets;
    ``target``: where to go once signed in)."""
    return render(
        request, "login.html", status, title="Sign in", message=message, next=target,
        signing_in=True,
    )  # fmt: skip


def elsewhere_page(target: str) -> Response:
    """What a visit another site led to gets: nothing done, and the same address to open from
    here (a search from a link would otherwise run and be logged in the user's name)."""
    return render(
        None, "elsewhere.html", 403, title="Opened from another site", target=_local(target)
    )


def error_page(request: Request | None, status: int, message: str) -> Response:
    """A page that says what went wrong, keeping the profile the request chose."""
    title = {404: "Not found", 429: "Too many tries"}.get(status, "Cannot do that")
    profile = None
    if request is not None:
        chosen = request.query_params.get("profile")
        if chosen and validate.PROFILE_PATTERN.fullmatch(chosen):
            profile = chosen
    return render(request, "error.html", status, title=title, message=message, profile=profile)


class Page:
    """One page request: its profile (``?profile=``, else the server's default) and a lease
    on that profile's memory."""

    def __init__(self, request: Request, profile: str | None = None) -> None:
        self.request = request
        self.params = request.query_params
        self.profile = profile or validate.profile(self.params.get("profile") or _default(request))

    @contextmanager
    def memory(self) -> Iterator[Memory]:
        with self.request.app.state.profiles.lease(self.profile) as memory:
            yield memory

    def render(self, template: str, memory: Memory, status: int = 200, **values: Any) -> Response:
        counts = {p.name: p.memories for p in profiles(memory)}
        names = sorted({*counts, self.profile, _default(self.request)})
        return render(
            self.request, template, status, profile=self.profile, profiles=names,
            counts=counts, **values,
        )  # fmt: skip

    def url(self, path: str, **params: Any) -> str:
        return views.address(path, self.profile, _default(self.request), **params)


def _default(request: Request) -> str:
    return str(request.app.state.default_profile)


def _failure(request: Request, exc: SlmError) -> Response:
    message = request.app.state.profiles.public(str(exc))
    return error_page(request, outcome(exc).http_status, message)


def guarded(handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
    """``handler`` with every library error shown as a page with its HTTP status."""

    def page(request: Request) -> Response:
        try:
            return handler(request)
        except SlmError as exc:
            return _failure(request, exc)

    return page


async def posted(request: Request) -> dict[str, str]:
    """The posted form's fields, the last value of each."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise InvalidInput(f"the form is over {MAX_FORM_BYTES} bytes")
    return {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}


async def form(request: Request) -> dict[str, str]:
    """The posted form's fields, refused without the form token of the browser's session."""
    fields = await posted(request)
    given = fields.get("csrf", "").encode("utf-8")
    session = session_of(request)
    if session is None or not hmac.compare_digest(given, session.csrf.encode("ascii")):
        raise InvalidInput("this form did not come from this server's page: reload the page")
    return fields


def add_pages(app: FastAPI, token: str | None, sessions: Sessions, attempts: Attempts) -> None:
    """Serve the page's routes, its stylesheet and its error pages on ``app``."""
    app.state.token = token
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")

    def get(path: str) -> Callable[[Callable[[Request], Response]], Any]:
        def register(handler: Callable[[Request], Response]) -> Any:
            return app.get(path, include_in_schema=False)(guarded(handler))

        return register

    def post(path: str, action: Callable[[Request, Page, dict[str, str]], Response]) -> None:
        async def submitted(request: Request) -> Response:
            try:
                fields = await form(request)
                page = Page(request)
                return await run_in_threadpool(action, request, page, fields)
            except SlmError as exc:
                return _failure(request, exc)

        app.post(path, include_in_schema=False)(submitted)

    @get("/")
    def search(request: Request) -> Response:
        page = Page(request)
        query = page.params.get("q", "").strip()
        k = _number(page.params.get("k"), 10, "k")
        typed = page.params.get("min_relevance", "").strip()
        minimum = _decimal(typed, "min_relevance")
        user = page.params.get("user", "").strip()
        shown: dict[str, Any] = {
            "q": query, "k": k, "min_relevance": typed, "user": user, "response": None
        }  # fmt: skip
        with page.memory() as memory:
            if query:
                response = memory.recall(
                    query, k=k, trace=True, min_relevance=minimum, user_id=user or None
                )
                if not response.results:
                    require(memory)  # a mistyped profile says so, naming those that exist
                shown.update(
                    response=response,
                    results=views.results(response),
                    abstention=abstention_words(response, minimum),
                )
            title = f"{query} - search" if query else "Search"
            return page.render("search.html", memory, title=title, **shown)

    @get("/ui/memories")
    def timeline(request: Request) -> Response:
        page = Page(request)
        p = page.params
        offset = _number(p.get("offset"), 0, "offset", lowest=0)
        chosen = {name: p.get(name, "").strip() for name in ("text", "source", "tag", "user")}
        moments = {name: p.get(name, "").strip() or None for name in ("after", "before")}
        with page.memory() as memory:
            records = memory.list(
                views.PAGE_SIZE + 1,
                offset,
                source=chosen["source"] or None,
                tags=[chosen["tag"]] if chosen["tag"] else [],
                after=moments["after"],
                before=moments["before"],
                text=chosen["text"] or None,
                user_id=chosen["user"] or None,
            )
            if not records and not offset:
                require(memory)
            filters = {**chosen, **{k: v or "" for k, v in moments.items()}}
            return page.render(
                "timeline.html",
                memory,
                title="Timeline",
                memories=[(r, views.Shown.of(r.content)) for r in records[: views.PAGE_SIZE]],
                filters=filters,
                offset=offset,
                newer=max(0, offset - views.PAGE_SIZE) if offset else None,
                older=offset + views.PAGE_SIZE if len(records) > views.PAGE_SIZE else None,
                done=p.get("done"),
            )

    @get("/ui/memories/{memory_id}")
    def detail(request: Request) -> Response:
        page = Page(request)
        memory_id = request.path_params["memory_id"]
        with page.memory() as memory:
            try:
                around = related(memory, memory_id)
            except InvalidInput:
                require(memory)
                raise _missing(memory_id, page.profile) from None
            return page.render(
                "memory.html",
                memory,
                title="Memory",
                around=around,
                record=around.memory,
                history=memory.history(around.memory.id),
                metadata=views.metadata(around.memory),
                done=page.params.get("done"),
            )

    @get("/ui/memories/{memory_id}/edit")
    def edit_form(request: Request) -> Response:
        page = Page(request)
        with page.memory() as memory:
            record = _record(memory, request.path_params["memory_id"], page.profile)
            return page.render("edit.html", memory, title="Edit", record=record, fields=None)

    def edit(request: Request, page: Page, fields: dict[str, str]) -> Response:
        with page.memory() as memory:
            record = _record(memory, request.path_params["memory_id"], page.profile)
            try:
                done = memory.update(record.id, fields.get("content", ""), **_described(fields))
            except InvalidInput as exc:
                return page.render(
                    "edit.html", memory, 400, title="Edit", record=record, fields=fields,
                    error=str(exc),
                )  # fmt: skip
        return _see(page.url(f"/ui/memories/{done.memory.id}", done="updated"))

    post("/ui/memories/{memory_id}/edit", edit)

    @get("/ui/memories/{memory_id}/forget")
    def forget_form(request: Request) -> Response:
        page = Page(request)
        with page.memory() as memory:
            record = _record(memory, request.path_params["memory_id"], page.profile)
            return page.render(
                "forget.html", memory, title="Forget", record=record,
                shown=views.Shown.of(record.content),
            )  # fmt: skip

    def forget(request: Request, page: Page, fields: dict[str, str]) -> Response:
        with page.memory() as memory:
            record = _record(memory, request.path_params["memory_id"], page.profile)
            memory.forget([record.id])
        return _see(page.url("/ui/memories", done="forgotten"))

    post("/ui/memories/{memory_id}/forget", forget)

    def unlink(request: Request, page: Page, fields: dict[str, str]) -> Response:
        with page.memory() as memory:
            record = _record(memory, request.path_params["memory_id"], page.profile)
            memory.unlink(record.id, fields.get("newer", ""))
        return _see(page.url(f"/ui/memories/{record.id}"))

    post("/ui/memories/{memory_id}/unlink", unlink)

    @get("/ui/hooks")
    def hooks(request: Request) -> Response:
        page = Page(request)
        session = page.params.get("session", "").strip()
        with page.memory() as memory:
            shown = hook_views.hooks_view(memory, session)
            return page.render("hooks.html", memory, title="Hooks", **shown)

    @get("/ui/add")
    def add_form(request: Request) -> Response:
        page = Page(request)
        with page.memory() as memory:
            return page.render("edit.html", memory, title="Add a memory", record=None, fields=None)

    def add(request: Request, page: Page, fields: dict[str, str]) -> Response:
        with page.memory() as memory:
            try:
                done = memory.remember(fields.get("content", ""), **_described(fields))
            except InvalidInput as exc:
                return page.render(
                    "edit.html", memory, 400, title="Add a memory", record=None, fields=fields,
                    error=str(exc),
                )  # fmt: skip
        state = "added" if done.created else "already"
        return _see(page.url(f"/ui/memories/{done.memory.id}", done=state))

    post("/ui/add", add)

    @get("/ui/health")
    def health(request: Request) -> Response:
        page = Page(request)
        with page.memory() as memory:
            report = memory.health()
            if not report["memories"]:
                require(memory)
            return page.render("health.html", memory, title="Health", report=report)

    @get("/ui/profiles")
    def profile_list(request: Request) -> Response:
        page = Page(request)
        with page.memory() as memory:
            return page.render(
                "profiles.html", memory, title="Profiles", listed=profiles(memory),
                done=page.params.get("done"),
            )  # fmt: skip

    def held(memory: Memory, name: str) -> Any:
        """The profile named in the address, as listed (refused when it holds nothing)."""
        found = [p for p in profiles(memory) if p.name == name]
        if not found:
            require(memory)
            raise NotFound(f"no profile {name!r} holds memories")
        return found[0]

    @get("/ui/profiles/{name}/delete")
    def delete_form(request: Request) -> Response:
        page = Page(request, validate.profile(request.path_params["name"]))
        with page.memory() as memory:
            target = held(memory, page.profile)
            return page.render("delete-profile.html", memory, title="Delete", target=target)

    def delete(request: Request, page: Page, fields: dict[str, str]) -> Response:
        page = Page(request, validate.profile(request.path_params["name"]))
        with page.memory() as memory:
            target = held(memory, page.profile)
            if fields.get("confirm", "").strip() != target.name:
                return page.render(
                    "delete-profile.html", memory, 400, title="Delete", target=target,
                    error=f"Type {target.name} to confirm: nothing was deleted.",
                )  # fmt: skip
            delete_profile(memory)
        return _see(views.address("/ui/profiles", _default(request), _default(request),
                                  done="deleted"))  # fmt: skip

    post("/ui/profiles/{name}/delete", delete)

    @get("/ui/login")
    def login_form(request: Request) -> Response:
        return login_page(request, status=200)

    @app.post("/ui/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        try:
            fields = await posted(request)
        except InvalidInput as exc:
            return error_page(request, 400, str(exc))
        target = _local(fields.get("next", "/"))
        client = client_of(request.scope)
        wait = attempts.wait(client)
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            message = f"Too many wrong tokens from this address: try again in {seconds} s."
            refused = login_page(request, message, 429, target)
            refused.headers["Retry-After"] = str(seconds)
            return refused
        given = fields.get("token", "").encode("utf-8")
        if not token or not hmac.compare_digest(given, token.encode("utf-8")):
            attempts.failed(client)
            return login_page(request, "That is not this server's token.", 401, target)
        old = session_of(request)
        if old is not None:
            sessions.end(old.id)  # a session id known before sign-in opens nothing after it
        response = _see(target)
        cookie = set_cookie_header(request.scope, sessions.start(signed_in=True))
        response.headers.append("set-cookie", cookie)
        return response

    def sign_out(request: Request, page: Page, fields: dict[str, str]) -> Response:
        session = session_of(request)
        if session is not None:
            sessions.end(session.id)
        response = _see("/ui/login")
        response.headers.append("set-cookie", set_cookie_header(request.scope, None))
        return response

    post("/ui/logout", sign_out)


def _local(target: str) -> str:
    """``target`` when it is a path of this site's pages, else ``/``."""
    if (
        not target.startswith("/")
        or target.startswith("//")
        or any(c == "\\" or ord(c) < 32 or ord(c) == 127 for c in target)
    ):
        return "/"
    return target


def _record(memory: Memory, memory_id: str, profile: str) -> Any:
    try:
        return memory.get(memory_id)
    except InvalidInput:
        raise _missing(memory_id, profile) from None


def _missing(memory_id: str, profile: str) -> NotFound:
    return NotFound(f"no memory {memory_id[:40]!r} in profile {profile!r}")


def _described(fields: dict[str, str]) -> dict[str, Any]:
    """What the add and edit forms say of a memory besides its text."""
    return {
        "source": fields.get("source") or None,
        "tags": views.tags_of(fields.get("tags", "")),
        "event_time": fields.get("event_time") or None,
    }


def _number(text: str | None, default: int, name: str, lowest: int = 1) -> int:
    if text is None or not text.strip():
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidInput(f"{name} must be a whole number, not {text[:40]!r}") from None
    if value < lowest:
        raise InvalidInput(f"{name} must be at least {lowest}")
    return value


def _decimal(text: str, name: str) -> float | None:
    """A number typed in a form, None when left empty; its range is the library's to check."""
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise InvalidInput(f"{name} must be a number, not {text[:40]!r}", field=name) from None


def _see(location: str) -> RedirectResponse:
    return RedirectResponse(location, status_code=303)
