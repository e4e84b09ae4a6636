"""Issue #32's server findings, each as the request that showed it: page sessions that are
real sign-ins, per-session form tokens, requests another site caused, ``/docs``, token
guessing, short tokens on a public bind, and a reverse proxy's Host.

The app runs in this process (Starlette's test client speaks ASGI to it), over a real
SQLite file; what a browser shows is checked in tests/test_web.py with Chromium.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from slm import ConfigError, Settings
from slm.server.rest import create_app, serve
from slm.server.web.sessions import MAX_FAILURES, MIN_TOKEN_CHARS, Attempts, Sessions
from slm.store import Location

TOKEN = "a-long-enough-token-for-tests"
BASE = "http://127.0.0.1:8765"


def app_over(path: Path, token: str | None = None) -> TestClient:
    app = create_app(
        Location(path=path / "web.db"),
        settings=Settings(embedder="fake"),
        token=token,
        loopback_only=token is None,
    )
    return TestClient(app, base_url=BASE, follow_redirects=False)


@pytest.fixture()
def locked(tmp_path: Path) -> Iterator[TestClient]:
    with app_over(tmp_path, TOKEN) as client:
        post(
            client,
            "/v1/memories",
            json={"content": "Maya moved to Lisbon in April 2024"},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        yield client


@pytest.fixture()
def open_site(tmp_path: Path) -> Iterator[TestClient]:
    with app_over(tmp_path) as client:
        post(client, "/v1/memories", json={"content": "Maya moved to Lisbon in April 2024"})
        yield client


def get(client: TestClient, path: str, session: str | None = None, **options: Any) -> Any:
    """A GET with exactly the session given (the client keeps no cookies between calls)."""
    return _send(client, "GET", path, session, **options)


def post(client: TestClient, path: str, session: str | None = None, **options: Any) -> Any:
    return _send(client, "POST", path, session, **options)


def _send(client: TestClient, method: str, path: str, session: str | None, **options: Any) -> Any:
    headers = dict(options.pop("headers", {}))
    if session is not None:
        headers["Cookie"] = f"slm_session_8765={session}"
    client.cookies.clear()
    try:
        return client.request(method, path, headers=headers, **options)
    finally:
        client.cookies.clear()


def cookie_of(response: object) -> str:
    header = response.headers["set-cookie"]  # type: ignore[attr-defined]
    match = re.match(r"slm_session_8765=([^;]*)", header)
    assert match is not None, header
    return match.group(1)


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match is not None
    return match.group(1)


def sign_in(client: TestClient) -> str:
    response = post(client, "/ui/login", data={"token": TOKEN, "next": "/"})
    assert response.status_code == 303
    return cookie_of(response)


def recalls_logged(path: Path) -> int:
    with sqlite3.connect(path / "web.db") as db:
        return int(db.execute("SELECT count(*) FROM recall_log").fetchone()[0])


# -- sessions -------------------------------------------------------------------------------


def test_each_sign_in_is_its_own_session_and_sign_out_revokes_it(locked: TestClient) -> None:
    first, second = sign_in(locked), sign_in(locked)
    assert first != second and TOKEN not in first
    page = get(locked, "/?q=Lisbon", session=first)
    assert page.status_code == 200 and "Lisbon in April" in page.text
    out = post(locked, "/ui/logout", data={"csrf": csrf_of(page.text)}, session=first)
    assert out.status_code == 303 and "Max-Age=0" in out.headers["set-cookie"]
    # The copy of the cookie kept from before sign-out opens nothing; the other session lives.
    assert get(locked, "/", session=first).status_code == 401
    assert get(locked, "/", session=second).status_code == 200
    assert get(locked, "/", session="forged-value").status_code == 401


def test_a_session_from_before_sign_in_opens_nothing_after_it(locked: TestClient) -> None:
    before = "p" * 43  # planted by someone else: the sign-in page itself hands out none
    assert "set-cookie" not in get(locked, "/ui/login").headers
    signed = post(locked, "/ui/login", data={"token": TOKEN, "next": "/"}, session=before)
    after = cookie_of(signed)
    assert after != before
    assert get(locked, "/", session=before).status_code == 401
    assert get(locked, "/", session=after).status_code == 200


def test_a_session_expires_and_the_oldest_go_past_the_limit() -> None:
    now = [1000.0]
    sessions = Sessions(seconds=60, limit=2, clock=lambda: now[0])
    one = sessions.start(signed_in=True)
    assert sessions.find(one.id) == one
    now[0] += 61
    assert sessions.find(one.id) is None
    a, b, c = (sessions.start(signed_in=True) for _ in range(3))
    assert sessions.find(a.id) is None and sessions.find(c.id) == c and len(sessions) == 2
    assert b.csrf != c.csrf


def test_requests_without_a_cookie_sign_no_one_out(locked: TestClient, tmp_path: Path) -> None:
    """Each page request without a cookie once started a session, and the table kept the
    newest 10,000: that many requests (no token needed) signed every user out. Sessions are
    now made only by a sign-in; a server without a token keeps nothing per visitor."""
    signed = sign_in(locked)
    for path in ("/", "/ui/login", "/ui/add", "/docs"):
        for _ in range(5):
            assert "set-cookie" not in get(locked, path).headers
    sessions = locked.app.sessions  # type: ignore[attr-defined]
    assert len(sessions) == 1
    assert get(locked, "/", session=signed).status_code == 200
    (tmp_path / "open").mkdir()
    with app_over(tmp_path / "open") as open_client:
        held = open_client.app.sessions  # type: ignore[attr-defined]
        first = get(open_client, "/ui/add")
        for _ in range(20):
            assert get(open_client, "/ui/add").headers["set-cookie"]
        assert len(held) == 0
        # the first visitor's form still works: its form token is its own
        done = post(
            open_client,
            "/ui/add",
            data={"csrf": csrf_of(first.text), "content": "Added by the first visitor"},
            session=cookie_of(first),
        )
        assert done.status_code == 303


def test_the_form_token_is_per_session_and_changes_at_sign_in(open_site: TestClient) -> None:
    first = get(open_site, "/ui/add", session=None)
    second = get(open_site, "/ui/add", session=None)
    one, two = cookie_of(first), cookie_of(second)
    assert csrf_of(first.text) != csrf_of(second.text)
    # A page keeps its session's form token; another session's token is refused.
    again = get(open_site, "/ui/add", session=one)
    assert "set-cookie" not in again.headers and csrf_of(again.text) == csrf_of(first.text)
    stolen = post(
        open_site,
        "/ui/add",
        data={"csrf": csrf_of(first.text), "content": "Planted by another session"},
        session=two,
    )
    assert stolen.status_code == 400 and "did not come from this server" in stolen.text
    assert "Planted" not in get(open_site, "/v1/memories").text
    done = post(
        open_site,
        "/ui/add",
        data={"csrf": csrf_of(first.text), "content": "Added from the page"},
        session=one,
    )
    assert done.status_code == 303


def test_sign_in_rotates_the_form_token(locked: TestClient) -> None:
    login = get(locked, "/ui/login")
    signed = post(
        locked,
        "/ui/login",
        data={"token": TOKEN, "next": "/"},
    )
    page = get(locked, "/", session=cookie_of(signed))
    assert csrf_of(page.text) not in login.text


# -- requests another site caused -------------------------------------------------------------


FRAME = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"}
LINK = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}


def test_another_sites_frame_or_link_runs_no_recall(open_site: TestClient, tmp_path: Path) -> None:
    logged = recalls_logged(tmp_path)
    framed = get(open_site, "/?q=Lisbon", headers=FRAME)
    assert framed.status_code == 403 and "Lisbon in April" not in framed.text
    assert "frame-ancestors 'none'" in framed.headers["content-security-policy"]
    followed = get(open_site, "/?q=Lisbon", headers=LINK)
    assert followed.status_code == 403 and "Lisbon in April" not in followed.text
    assert 'href="/?q=Lisbon"' in followed.text  # the same address, to open from here
    sibling = {**LINK, "Sec-Fetch-Site": "same-site"}  # another port of this host
    assert get(open_site, "/?q=Lisbon", headers=sibling).status_code == 403
    # The user's own visits and this site's links still work.
    for site in ("none", "same-origin"):
        page = get(open_site, "/?q=Lisbon", headers={**LINK, "Sec-Fetch-Site": site})
        assert page.status_code == 200 and "Lisbon in April" in page.text
    # The log is written by a thread of its own, in order: once these two are there, a
    # recall the refused requests had run would be there too.
    deadline = time.monotonic() + 30
    while recalls_logged(tmp_path) < logged + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert recalls_logged(tmp_path) == logged + 2


def test_another_sites_requests_are_refused_on_every_route(open_site: TestClient) -> None:
    fetch = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
    for path in ("/docs", "/docs/openapi.json", "/v1/memories", "/v1/health", "/ui/memories"):
        assert get(open_site, path, headers=fetch).status_code == 403, path
    assert get(open_site, "/docs", headers=FRAME).status_code == 403
    posted = post(
        open_site,
        "/v1/recall",
        json={"query": "Lisbon"},
        headers={**fetch, "Sec-Fetch-Mode": "cors"},
    )
    assert posted.status_code == 403 and posted.json()["error"]["type"] == "cross_site"
    # A browser without Fetch Metadata: a write from another origin is refused too.
    page = get(open_site, "/ui/add")
    form = post(
        open_site,
        "/ui/add",
        data={"csrf": csrf_of(page.text), "content": "From elsewhere"},
        headers={"Origin": "http://evil.example"},
        session=cookie_of(page),
    )
    assert form.status_code == 403


def test_docs_are_protected_like_the_page_and_serve_only_the_reference(
    open_site: TestClient,
) -> None:
    docs = get(open_site, "/docs")
    policy = docs.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
    assert "<script>" not in docs.text  # no inline script: only files from /docs/assets
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "slm-docs.js"):
        assert get(open_site, f"/docs/assets/{name}").status_code == 200, name
    for name in ("index.html", "oauth2-redirect.html", "swagger-initializer.js", "..%2Fx"):
        assert get(open_site, f"/docs/assets/{name}").status_code == 404, name
    description = get(open_site, "/docs/openapi.json").json()
    assert description["openapi"].startswith("3.0") and "/v1/recall" in description["paths"]
    assert '"anyOf"' not in str(description) and "'type': 'null'" not in str(description)
    assert get(open_site, "/openapi.json").json()["openapi"].startswith("3.1")


def test_docs_behind_a_token_take_a_sign_in(locked: TestClient) -> None:
    assert get(locked, "/docs").status_code == 401
    cookie = sign_in(locked)
    assert get(locked, "/docs", session=cookie).status_code == 200
    assert get(locked, "/docs/openapi.json", session=cookie).status_code == 200


# -- guessing the token ----------------------------------------------------------------------


def test_wrong_bearer_tokens_are_refused_after_a_few_tries(locked: TestClient) -> None:
    for _ in range(MAX_FAILURES):
        wrong = get(locked, "/v1/health", headers={"Authorization": "Bearer guess"})
        assert wrong.status_code == 401
    right = get(locked, "/v1/health", headers={"Authorization": f"Bearer {TOKEN}"})
    assert right.status_code == 429 and int(right.headers["retry-after"]) >= 1
    assert right.json()["error"]["type"] == "too_many_attempts"


def test_wrong_sign_ins_are_refused_after_a_few_tries(locked: TestClient) -> None:
    for _ in range(MAX_FAILURES):
        assert post(locked, "/ui/login", data={"token": "guess"}).status_code == 401
    refused = post(locked, "/ui/login", data={"token": TOKEN, "next": "/"})
    assert refused.status_code == 429 and "try again in" in refused.text
    assert "set-cookie" not in refused.headers or "Max-Age=0" not in refused.headers["set-cookie"]


def test_failures_age_out_of_the_window() -> None:
    now = [0.0]
    attempts = Attempts(limit=2, window=10, clock=lambda: now[0])
    attempts.failed("a")
    attempts.failed("a")
    assert attempts.wait("a") == pytest.approx(10) and attempts.wait("b") == 0
    now[0] = 10.5
    assert attempts.wait("a") == 0


def test_a_public_bind_refuses_a_short_token(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"at least {MIN_TOKEN_CHARS}"):
        serve(host="0.0.0.0", port=0, location=Location(path=tmp_path / "x.db"), token="a")
    assert not (tmp_path / "x.db").exists()  # refused before anything was opened


# -- behind a reverse proxy ----------------------------------------------------------------


def test_sign_in_works_behind_a_proxy_whose_host_has_no_port(tmp_path: Path) -> None:
    app = create_app(
        Location(path=tmp_path / "web.db"),
        settings=Settings(embedder="fake"),
        token=TOKEN,
        loopback_only=False,
    )
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        proxied = {"Host": "memory.example", "X-Forwarded-Proto": "https"}
        signed = post(client, "/ui/login", data={"token": TOKEN, "next": "/"}, headers=proxied)
        assert signed.status_code == 303 and "Secure" in signed.headers["set-cookie"]
        cookie = cookie_of(signed)
        assert get(client, "/", headers=proxied, session=cookie).status_code == 200


# -- dependencies ----------------------------------------------------------------------------

#: The first release of each server dependency without the advisories published against it.
FIXED = {
    "starlette": ("1.6", "CVE-2025-62727 Range DoS, 2026 Host/path/form advisories in 1.3-1.5"),
    "h11": ("0.16", "CVE-2025-43859 request smuggling"),
    "jinja2": ("3.1.6", "CVE-2025-27516 sandbox escape"),
}


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def test_dependency_floors_exclude_releases_with_advisories() -> None:
    import tomllib
    from importlib.metadata import version

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    for extra in ("server", "test"):
        floors = {
            re.split(r"[<>=\[]", line)[0].lower(): line
            for line in project["project"]["optional-dependencies"][extra]
        }
        for name, (fixed, why) in FIXED.items():
            line = floors.get(name)
            assert line is not None and ">=" in line, f"{extra}: no floor for {name} ({why})"
            floor = line.split(">=")[1].split(",")[0]
            assert _release(floor) >= _release(fixed), f"{extra}: {line} admits {why}"
            assert _release(version(name)) >= _release(fixed), f"installed {name} has {why}"


# -- what an error says ---------------------------------------------------------------------


def test_a_bad_profile_name_in_a_path_is_named_as_such(open_site: TestClient) -> None:
    refused = _send(open_site, "DELETE", "/v1/profiles/no%20spaces?confirm=no%20spaces", None)
    assert refused.status_code == 400 and refused.json()["error"]["field"] == "name"
    unlink = "/v1/memories/0123456789abcdef/replaced-by/nope"
    assert _send(open_site, "DELETE", unlink, None).json()["error"]["field"] == "newer"


def test_an_error_does_not_say_where_the_store_is(
    open_site: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client learns from an error what went wrong, not the store's file path: not from a
    missing profile (over REST, or on the page), nor from a store that stays busy."""
    from slm.store import sqlite_conn

    asked = [
        ("DELETE", "/v1/profiles/ghost?confirm=ghost"),
        ("GET", "/v1/memories?profile=ghost"),
        ("GET", "/?profile=ghost&q=x"),
    ]
    for method, path in asked:
        missing = _send(open_site, method, path, None)
        assert missing.status_code == 404 and "ghost" in missing.text
        assert "web.db" not in missing.text and "in the store" in missing.text, missing.text
    where = str(tmp_path / "web.db")
    monkeypatch.setattr(sqlite_conn, "BUSY_TIMEOUT_S", 0.2)
    with sqlite3.connect(where, isolation_level=None) as other:
        other.execute("BEGIN EXCLUSIVE")
        busy = post(open_site, "/v1/memories", json={"content": "written while locked"})
        other.execute("ROLLBACK")
    assert busy.status_code == 503 and "stayed busy" in busy.json()["error"]["message"]
    assert "web.db" not in busy.text, busy.text


# -- what the lockout counts, in a real server ---------------------------------------------


@contextmanager
def real_server(tmp_path: Path, *args: str, **env: str) -> Iterator[str]:
    """``slm serve`` in its own process on a free loopback port (uvicorn reads the
    forwarded headers, not the test client): its address."""
    environ = {**os.environ, "SLM_API_TOKEN": TOKEN, "SLM_EMBEDDER": "fake", **env}
    environ["SLM_DB"] = str(tmp_path / "served.db")
    command = [sys.executable, "-m", "slm", "serve", "--port", "0", *args]
    process = subprocess.Popen(command, env=environ, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        said = [process.stderr.readline() for _ in range(1)]
        while not (found := re.search(r"(http://127\.0\.0\.1:\d+)/", said[-1])):
            assert said[-1] and len(said) < 50, said
            said.append(process.stderr.readline())
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(timeout=30)


def status_of(url: str, headers: dict[str, str]) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers)) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)


def test_wrong_tokens_from_one_peer_are_locked_out_whatever_it_forwards(tmp_path: Path) -> None:
    """uvicorn believed X-Forwarded-For from 127.0.0.1 by default, and the lockout counted
    the address it gave: a new header with each guess, and 40 wrong tokens got 401, none
    429. Forwarded headers are now believed only from proxies the user names."""
    with real_server(tmp_path) as base:
        answers = [
            status_of(
                f"{base}/v1/health",
                {"Authorization": "Bearer guess", "X-Forwarded-For": f"10.0.{i // 250}.{i % 250}"},
            )
            for i in range(40)
        ]
    assert answers[:MAX_FAILURES] == [401] * MAX_FAILURES
    assert set(answers[MAX_FAILURES:]) == {429}


def test_a_named_proxy_is_believed_for_its_clients(tmp_path: Path) -> None:
    """Behind a proxy the user names, each client it forwards is counted as itself: one
    client is locked out, another forwarded by the same proxy is not."""
    with real_server(tmp_path, "--trusted-proxies", "127.0.0.1") as base:
        guessing = {"Authorization": "Bearer guess", "X-Forwarded-For": "203.0.113.7"}
        answers = [status_of(f"{base}/v1/health", guessing) for _ in range(MAX_FAILURES + 2)]
        other = {"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": "203.0.113.8"}
        assert status_of(f"{base}/v1/health", other) == 200
    assert answers[-1] == 429


def test_a_trusted_proxy_that_is_not_an_address_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not an address or a network"):
        serve(
            host="127.0.0.1",
            port=0,
            location=Location(path=tmp_path / "x.db"),
            trusted_proxies="10.0.0.1, my-proxy",
        )
