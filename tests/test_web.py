"""The web page (docs/web.md): a real ``slm serve`` spoken to by a real headless Chromium
(Debian's ``chromium``, driven by Playwright), and over plain HTTP for what a browser does
not show (status codes, headers, forms from elsewhere).

The browser tests skip when no Chromium is installed, unless SLM_REQUIRE_BROWSER=1 makes
that a failure (CI installs it). Screenshots of the main views land in
``build/test-artifacts/web`` (not committed).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_http import TOKEN, run_server

ARTIFACTS = Path(__file__).resolve().parents[1] / "build" / "test-artifacts" / "web"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRED = os.environ.get("SLM_REQUIRE_BROWSER") == "1"
NOTES = [
    {"content": "Maya moved to Lisbon in April 2024", "source": "maya", "tags": ["home"]},
    {"content": "Sam's sister Priya is allergic to cats", "source": "sam"},
    {"content": "The boiler is serviced every October by Kelvin Heating", "source": "notes"},
    {"content": "Maya's climbing gym is on Rua Augusta", "source": "maya", "tags": ["sport"]},
    {"content": "Lisbon " + "and a very long note " * 200, "source": "notes"},
]
XSS = '<script>window.hacked = 1</script><img src=x onerror="window.hacked = 2"> Ana lives in Porto'


def seed(url: str, headers: dict[str, str] | None = None, profile: str = "default") -> list[str]:
    body = {"memories": NOTES}
    response = httpx.post(
        f"{url}/v1/memories", json=body, headers={**(headers or {}), "X-SLM-Profile": profile}
    )
    assert response.status_code in (200, 201), response.text
    return [m["id"] for m in response.json()["memories"]]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    server = run_server(tmp_path_factory.mktemp("web"))
    url = next(server)
    ids = seed(url)
    seed(url, profile="work")
    try:
        yield url, ids
    finally:
        server.close()


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = run_server(tmp_path_factory.mktemp("locked"), SLM_API_TOKEN=TOKEN)
    url = next(server)
    seed(url, {"Authorization": f"Bearer {TOKEN}"})
    try:
        yield url
    finally:
        server.close()


# -- over HTTP ------------------------------------------------------------------------------


def test_pages_answer_with_html_and_strict_headers(site: tuple[str, list[str]]) -> None:
    url, ids = site
    for path in ("/", "/?q=Lisbon", "/ui/memories", f"/ui/memories/{ids[0]}", "/ui/health"):
        response = httpx.get(url + path)
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith("text/html")
        assert "script-src" not in response.headers["content-security-policy"]
        assert "default-src 'none'" in response.headers["content-security-policy"]
    assert httpx.get(url + "/ui/static/slm.css").status_code == 200


def test_another_sites_page_cannot_load_a_page(site: tuple[str, list[str]]) -> None:
    url, _ = site
    behind = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
    refused = httpx.get(url + "/?q=Lisbon", headers=behind)
    assert refused.status_code == 403 and refused.headers["content-type"].startswith("text/html")
    # Following a link from elsewhere does nothing either, but offers the address.
    followed = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
    page = httpx.get(url + "/?q=Lisbon", headers=followed)
    assert page.status_code == 403 and 'href="/?q=Lisbon"' in page.text


def test_an_unknown_memory_or_page_is_a_not_found_page(site: tuple[str, list[str]]) -> None:
    url, _ = site
    for path in ("/ui/memories/0123456789abcdef", "/ui/memories/not-an-id", "/ui/nothing"):
        response = httpx.get(url + path)
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("text/html")
        assert "Not found" in response.text


def test_a_form_from_elsewhere_changes_nothing(site: tuple[str, list[str]]) -> None:
    url, ids = site
    response = httpx.post(
        f"{url}/ui/memories/{ids[2]}/forget",
        content=b"csrf=guessed",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 400 and "did not come from this server" in response.text
    assert httpx.get(f"{url}/v1/memories/{ids[2]}").status_code == 200
    # The JSON API still takes JSON only.
    form = httpx.post(
        f"{url}/v1/recall",
        content=b"query=x",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 415


def test_a_token_protected_server_asks_for_the_token(locked: str) -> None:
    refused = httpx.get(locked + "/?q=Lisbon")
    assert refused.status_code == 401 and "Sign in" in refused.text
    assert "Lisbon in April" not in refused.text
    wrong = httpx.post(locked + "/ui/login", data={"token": "nope", "next": "/"})
    assert wrong.status_code == 401
    with httpx.Client(base_url=locked) as client:
        signed = client.post("/ui/login", data={"token": TOKEN, "next": "/?q=Lisbon"})
        assert signed.status_code == 303 and signed.headers["location"] == "/?q=Lisbon"
        cookie = signed.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert TOKEN.lower() not in cookie  # a random session id, not the token
        port = locked.rsplit(":", 1)[1]
        assert cookie.startswith(f"slm_session_{port}=")
        page = client.get("/?q=Lisbon")
        assert page.status_code == 200 and "Lisbon in April" in page.text
        # The cookie opens the page, not the API: that still needs the bearer token.
        assert client.post("/v1/recall", json={"query": "Lisbon"}).status_code == 401
        # Other cookies on the host, even malformed ones, do not hide it.
        value = client.cookies[f"slm_session_{port}"]
        mixed = httpx.get(
            locked + "/", headers={"Cookie": f'theme; x={{"a":1}}; slm_session_{port}={value}'}
        )
        assert mixed.status_code == 200
        page = client.get("/")
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf is not None
        out = client.post("/ui/logout", data={"csrf": csrf.group(1)})
        assert out.status_code == 303 and client.get("/").status_code == 401
    # Sign-in never sends the browser to another site.
    away = httpx.post(locked + "/ui/login", data={"token": TOKEN, "next": "//evil.example/"})
    assert away.headers["location"] == "/"


# -- in a browser ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        if REQUIRED:
            pytest.fail("SLM_REQUIRE_BROWSER=1 but no chromium is installed")
        pytest.skip("no chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    tab = context.new_page()
    dialogs: list[str] = []
    tab.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    tab.dialogs = dialogs
    yield tab
    context.close()


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_search_shows_results_and_a_results_trace(page: Any, site: tuple[str, list[str]]) -> None:
    url, _ = site
    page.goto(url + "/")
    page.get_by_label("Question").fill("Where did Maya move?")
    page.get_by_label("Question").press("Enter")
    page.wait_for_url(re.compile(r".*\?.*q=Where"))
    first = page.locator("li.result").first
    assert "Maya moved to Lisbon" in first.inner_text()
    assert "relevance" in first.inner_text()
    # The trace opens from the keyboard too: focus its summary and press Enter.
    summary = first.locator("summary")
    summary.focus()
    page.keyboard.press("Enter")
    table = first.locator("details table")
    assert table.is_visible()
    channels = table.locator("tbody th").all_inner_texts()
    assert "semantic" in channels or "bm25" in channels
    assert "Read: " in first.locator("details").inner_text()  # what the reranker read
    assert "of channels" in first.locator("details").inner_text()
    took = page.locator("details.timings")  # where the recall's time went, on demand
    assert took.locator("summary").inner_text().startswith("Took ")
    took.locator("summary").click()
    assert "embedding wait" in took.inner_text() and "rerank" in took.inner_text()
    shot(page, "search")
    # The search is in the address: reloading shows it again.
    page.reload()
    assert page.get_by_label("Question").input_value() == "Where did Maya move?"
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "search-phone")


def test_the_api_reference_renders_and_tries_a_request_offline(
    page: Any, site: tuple[str, list[str]]
) -> None:
    url, _ = site
    asked: list[str] = []
    refused: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.on(
        "console",
        lambda message: (
            refused.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    page.goto(url + "/docs")
    page.get_by_text("POST/v1/recall").first.wait_for(timeout=20_000)
    listed = page.locator(".opblock-summary-path").all_inner_texts()
    assert {"/v1/recall", "/v1/memories", "/v1/health"} <= {p.strip() for p in listed}
    assert "Unable to render" not in page.inner_text("body")
    shot(page, "docs")
    # Try a request the way a person would: open the health route, try it, execute.
    page.locator("#operations-default-health_v1_health_get").click()
    page.get_by_role("button", name="Try it out").click()
    page.get_by_role("button", name="Execute").click()
    answer = page.locator(".live-responses-table tbody .response-col_status")
    answer.first.wait_for(timeout=20_000)
    assert "200" in answer.first.inner_text()
    assert '"memories"' in page.locator(".live-responses-table tbody").first.inner_text()
    assert all(address.startswith(url) for address in asked), asked
    assert refused == []


def test_adding_a_memory_and_finding_it(page: Any, site: tuple[str, list[str]]) -> None:
    url, _ = site
    page.goto(url + "/ui/add")
    page.get_by_label("Content").fill("The spare key is under the blue flowerpot")
    page.get_by_label("Source").fill("notes")
    page.get_by_label("Tags, comma-separated").fill("home, keys")
    page.get_by_role("button", name="Remember").click()
    assert "Stored." in page.inner_text("main")
    shot(page, "memory")
    page.goto(url + "/?q=where+is+the+spare+key")
    assert "blue flowerpot" in page.locator("li.result").first.inner_text()


def test_forgetting_asks_first_then_the_memory_is_gone(
    page: Any, site: tuple[str, list[str]]
) -> None:
    url, ids = site
    page.goto(f"{url}/ui/memories/{ids[2]}")
    page.get_by_role("link", name="Forget…").click()
    assert "Forget this memory?" in page.inner_text("h1")
    page.get_by_role("link", name="Cancel").click()
    assert httpx.get(f"{url}/v1/memories/{ids[2]}").status_code == 200
    page.get_by_role("link", name="Forget…").click()
    page.get_by_role("button", name="Forget it").click()
    assert "The memory was forgotten." in page.inner_text("main")
    assert "boiler" not in page.inner_text("main")
    assert httpx.get(f"{url}/v1/memories/{ids[2]}").status_code == 404
    page.goto(url + "/?q=boiler+service")
    assert "Kelvin Heating" not in page.inner_text("main")


def test_editing_keeps_the_old_version_as_history(page: Any, site: tuple[str, list[str]]) -> None:
    url, ids = site
    page.goto(f"{url}/ui/memories/{ids[3]}/edit")
    page.get_by_label("Content").fill("Maya's climbing gym moved to Rua da Prata")
    page.get_by_role("button", name="Save as a new version").click()
    main = page.inner_text("main")
    assert "Updated" in main and "Rua da Prata" in main and "Replaces" in main
    page.locator("main h2:has-text('Replaces') + ul a").first.click()
    assert "replaced by" in page.inner_text("main")


def test_timeline_pages_filters_and_truncates(page: Any, site: tuple[str, list[str]]) -> None:
    url, _ = site
    page.goto(url + "/ui/memories")
    items = page.locator("ol.timeline > li")
    assert items.count() >= 4
    long_item = page.locator("ol.timeline > li", has_text="a very long note").first
    assert "more characters" in long_item.inner_text()
    assert len(long_item.inner_text()) < 1000
    shot(page, "timeline")
    page.get_by_label("Source").fill("maya")
    page.get_by_role("button", name="Filter").click()
    texts = page.locator("ol.timeline > li .content").all_inner_texts()
    assert texts and all("Maya" in text for text in texts)
    page.goto(url + "/ui/memories?text=LISBON")
    found = page.locator("li .content").all_inner_texts()
    assert found and all("lisbon" in t.lower() for t in found)


def test_profiles_switch_and_health_lists_the_channels(
    page: Any, site: tuple[str, list[str]]
) -> None:
    url, _ = site
    page.goto(url + "/ui/health")
    for channel in ("semantic", "bm25", "temporal", "standing", "hopfield", "spreading"):
        assert channel in page.inner_text("main")
    shot(page, "health")
    page.get_by_label("Profile").select_option("work")
    page.get_by_role("button", name="Switch").click()
    assert "profile work" in page.inner_text("footer")
    page.get_by_role("link", name="Timeline").click()
    assert "profile=work" in page.url


def test_html_in_a_memory_is_shown_as_text_never_run(
    page: Any, site: tuple[str, list[str]]
) -> None:
    url, _ = site
    page.goto(url + "/ui/add")
    page.get_by_label("Content").fill(XSS)
    page.get_by_role("button", name="Remember").click()
    assert "<script>window.hacked = 1</script>" in page.inner_text("main")
    page.goto(url + "/?q=where+does+Ana+live")
    assert "<img src=x" in page.inner_text("main")
    page.goto(url + "/ui/memories")
    assert page.evaluate("window.hacked") is None
    assert page.locator("main img").count() == 0 and page.dialogs == []


def test_a_locked_page_asks_for_the_token_in_the_browser(page: Any, locked: str) -> None:
    response = page.goto(locked + "/?q=Lisbon")
    assert response.status == 401 and "Lisbon in April" not in page.inner_text("main")
    shot(page, "sign-in")
    page.get_by_label("Token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    assert "Maya moved to Lisbon" in page.inner_text("main")


def test_slm_ui_serves_the_page_on_loopback(tmp_path: Path) -> None:
    import queue
    import subprocess
    import sys
    import threading

    from test_http import server_env

    command = [sys.executable, "-m", "slm", "--db", str(tmp_path / "ui.db"), "ui", "--no-browser"]
    process = subprocess.Popen(
        command, env=server_env(tmp_path), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            lines.put(raw.decode("utf-8", "replace"))

    threading.Thread(target=read, daemon=True).start()
    try:
        found = None
        while found is None:
            line = lines.get(timeout=30)  # a silent process fails the test, never hangs it
            found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        page = httpx.get(found.group(0))
        assert page.status_code == 200 and "Search memory" in page.text
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_add_and_edit_forms_store_what_they_say(site: tuple[str, list[str]]) -> None:
    """Over HTTP, as a browser without script posts them: the fields besides the text
    (source, tags, time) reach the memory on add and on edit alike."""
    url, _ = site
    headers = {"X-SLM-Profile": "forms"}
    httpx.post(f"{url}/v1/memories", headers=headers, json={"content": "A first note"})
    with httpx.Client(base_url=url) as browser:  # keeps the page's session cookie
        form = browser.get("/ui/add?profile=forms").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', form)
        assert csrf is not None
        fields = {"csrf": csrf.group(1), "source": "ana", "tags": "home, move",
                  "event_time": "2024-02-10T09:00:00Z"}  # fmt: skip
        added = browser.post("/ui/add?profile=forms", data={**fields, "content": "Ana moved"})
        assert added.status_code == 303
        made = added.headers["location"].split("/ui/memories/")[1].split("?")[0]
        edited = browser.post(
            f"/ui/memories/{made}/edit?profile=forms",
            data={**fields, "source": "bo", "content": "Ana moved to Lisbon"},
        )
        assert edited.status_code == 303
    old = httpx.get(f"{url}/v1/memories/{made}", headers=headers).json()
    assert (old["source"], old["tags"], old["event_time"]) == (
        "ana", ["home", "move"], "2024-02-10T09:00:00Z"
    )  # fmt: skip
    assert old["superseded_by"] is not None
    new = httpx.get(f"{url}/v1/memories/{old['superseded_by']}", headers=headers).json()
    assert (new["content"], new["source"], new["tags"]) == (
        "Ana moved to Lisbon",
        "bo",
        ["home", "move"],
    )


def test_a_search_with_a_minimum_relevance(site: tuple[str, list[str]]) -> None:
    url, _ = site
    every = httpx.post(f"{url}/v1/recall", json={"query": "Where did Maya move?"}).json()
    top = max(r["relevance_score"] for r in every["results"])
    page = httpx.get(f"{url}/", params={"q": "Where did Maya move?", "min_relevance": "0"})
    assert page.status_code == 200
    assert page.text.count('class="result"') == len(every["results"])
    assert 'name="min_relevance" type="number" min="0" max="1" step="any" value="0"' in page.text
    above = f"{(top + 1) / 2:.4f}"
    none = httpx.get(f"{url}/", params={"q": "Where did Maya move?", "min_relevance": above})
    assert none.status_code == 200 and 'class="result"' not in none.text
    assert f"with a relevance of at least {float(above):g}, the minimum asked for" in none.text
    for bad, said in (("2", "min_relevance must be in 0..1"), ("high", "must be a number")):
        refused = httpx.get(f"{url}/", params={"q": "Maya", "min_relevance": bad})
        assert refused.status_code == 400 and said in refused.text


def test_a_wrong_replacement_is_undone_from_the_page(site: tuple[str, list[str]]) -> None:
    url, _ = site
    headers = {"X-SLM-Profile": "links"}
    old = httpx.post(
        f"{url}/v1/memories", headers=headers, json={"content": "Ana lives in Porto"}
    ).json()
    new = httpx.patch(
        f"{url}/v1/memories/{old['id']}", headers=headers, json={"content": "Ana has a cat"}
    ).json()
    with httpx.Client(base_url=url) as browser:  # keeps the page's session cookie
        page = browser.get(f"/ui/memories/{old['id']}?profile=links")
        assert "Not a replacement" in page.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf is not None
        done = browser.post(
            f"/ui/memories/{old['id']}/unlink?profile=links",
            data={"csrf": csrf.group(1), "newer": new["id"]},
        )
        assert done.status_code == 303
        held = httpx.get(f"{url}/v1/memories/{old['id']}", headers=headers).json()
        assert held["superseded_by"] is None and held["valid_to"] is None
        again = browser.post(
            f"/ui/memories/{old['id']}/unlink?profile=links",
            data={"csrf": csrf.group(1), "newer": new["id"]},
        )
        assert again.status_code == 400 and "no link to undo" in again.text


def test_profiles_are_listed_with_counts_and_deleted_only_when_confirmed(
    site: tuple[str, list[str]],
) -> None:
    url, _ = site
    for text in ("Scratch note one", "Scratch note two"):
        httpx.post(f"{url}/v1/memories", params={"profile": "scratch"}, json={"content": text})
    with httpx.Client(base_url=url) as browser:  # keeps the page's session cookie
        listing = browser.get("/ui/profiles")
        assert listing.status_code == 200
        row = re.search(r"scratch</a></th><td>(\d+)</td>", listing.text)
        assert row is not None and row.group(1) == "2"
        assert '<option value="work">work (' in listing.text  # the switcher shows counts
        form = browser.get("/ui/profiles/scratch/delete?profile=scratch")
        assert "Delete profile scratch?" in form.text and "2 memories" in form.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf is not None
        action = "/ui/profiles/scratch/delete?profile=scratch"
        wrong = browser.post(action, data={"csrf": csrf.group(1), "confirm": "scrat"})
        assert wrong.status_code == 400 and "nothing was deleted" in wrong.text
        assert httpx.get(f"{url}/v1/memories", params={"profile": "scratch"}).status_code == 200
        done = browser.post(action, data={"csrf": csrf.group(1), "confirm": "scratch"})
        assert done.status_code == 303 and "done=deleted" in done.headers["location"]
    left = [p["name"] for p in httpx.get(f"{url}/v1/profiles").json()["profiles"]]
    assert "scratch" not in left and "work" in left


def test_one_memory_is_counted_in_the_singular(site: tuple[str, list[str]]) -> None:
    url, _ = site
    httpx.post(f"{url}/v1/memories", params={"profile": "single"}, json={"content": "A lone note"})
    with httpx.Client(base_url=url) as browser:
        health = browser.get("/ui/health?profile=single").text
        assert "1 memory." in health and "1 memories" not in health
        form = browser.get("/ui/profiles/single/delete?profile=single").text
        assert "Its 1 memory," in form and "1 memories" not in form


def test_a_mistyped_profile_says_so_and_names_the_others(site: tuple[str, list[str]]) -> None:
    url, _ = site
    for path in ("/?q=Lisbon&profile=wrok", "/ui/memories?profile=wrok", "/ui/health?profile=wrok"):
        page = httpx.get(url + path)
        assert page.status_code == 404, path
        assert "no profile &#39;wrok&#39;" in page.text and "work (" in page.text
    # Adding to a new profile still creates it.
    assert httpx.get(url + "/ui/add?profile=fresh").status_code == 200


def test_the_page_filters_by_user_and_shows_whose_memory_and_its_versions(
    site: tuple[str, list[str]],
) -> None:
    """Issue 61: a user filter on search and timeline, the owner on every card, "possibly
    superseded" on the card itself (not only in the collapsed trace), and the versions."""
    url, _ = site
    headers = {"X-SLM-Profile": "owners"}
    made = {}
    for user in ("alice", "bob"):
        stored = httpx.post(
            f"{url}/v1/memories",
            headers=headers,
            json={"content": "Ana lives in Porto.", "user_id": user,
                  "event_time": "2024-01-01T00:00:00Z"},
        )  # fmt: skip
        made[user] = stored.json()["id"]
    newer = httpx.post(
        f"{url}/v1/memories",
        headers=headers,
        json={"content": "Ana lives in Lisbon.", "user_id": "alice",
              "event_time": "2024-06-01T00:00:00Z"},
    ).json()  # fmt: skip
    found = httpx.get(f"{url}/", params={"q": "Where does Ana live?", "profile": "owners"})
    assert "user alice" in found.text and "user bob" in found.text
    card = found.text.split(f'id="result-{made["alice"]}"')[1].split("</li>")[0]
    visible = card.split('<details class="trace">')[0]
    assert 'class="superseded"' in visible and newer["id"] in visible
    only = httpx.get(
        f"{url}/", params={"q": "Where does Ana live?", "profile": "owners", "user": "bob"}
    )
    assert only.text.count('class="result"') == 1 and "user alice" not in only.text
    timeline = httpx.get(f"{url}/ui/memories", params={"profile": "owners", "user": "alice"})
    assert timeline.text.count("user alice") == 2 and "user bob" not in timeline.text
    updated = httpx.patch(
        f"{url}/v1/memories/{made['bob']}", headers=headers, json={"content": "Ana lives in Faro."}
    ).json()
    detail = httpx.get(f"{url}/ui/memories/{made['bob']}", params={"profile": "owners"})
    assert "<h2>Versions</h2>" in detail.text and updated["id"] in detail.text
    assert "user bob" in detail.text
