"""The REST API: a real ``slm serve`` on a free loopback port, spoken to over HTTP."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import negative_data_rejection, positive_data_acceptance

from slm import Settings, StoreError
from slm.server.pool import Profiles
from slm.store import Location

TOKEN = "s3cret-token-for-tests"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def server_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLM_")}
    return {**env, "SLM_EMBEDDER": "fake", "SLM_HOME": str(home), **extra}


def slm(db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "slm", "--db", str(db), *args]


def run_server(workdir: Path, **env: str) -> Iterator[str]:
    """Start ``slm serve``, wait until it answers, yield its URL, stop it."""
    port = free_port()
    log = (workdir / "server.log").open("w")
    command = slm(workdir / "api.db", "serve", "--port", str(port))
    process = subprocess.Popen(command, env=server_env(workdir, **env), stderr=log, stdout=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            if process.poll() is not None:
                pytest.fail(f"server exited: {(workdir / 'server.log').read_text()}")
            try:
                httpx.get(f"{url}/openapi.json", timeout=1.0)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            pytest.fail("server did not start within 30 s")
        yield url
    finally:
        stop(process)
        log.close()


def stop(process: subprocess.Popen[Any]) -> None:
    """End a server started for a test, killing it if it does not stop in 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from run_server(tmp_path_factory.mktemp("api"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from run_server(tmp_path_factory.mktemp("secured"), SLM_API_TOKEN=TOKEN)


@pytest.fixture
def client(api: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api, timeout=10.0) as http:
        yield http


def error_of(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"] == "application/json"
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"type", "message", "field"} and error["message"]
    return error


# -- the happy path ----------------------------------------------------------------------------


def test_remember_get_list_recall_forget(client: httpx.Client) -> None:
    headers = {"X-SLM-Profile": "happy"}
    made = client.post(
        "/v1/memories",
        headers=headers,
        json={
            "content": "The boiler is serviced every October",
            "source": "home",
            "event_time": "2024-10-01T09:00:00Z",
            "confidence": 0.9,
            "metadata": {"room": "cellar"},
            "tags": ["house"],
        },
    )
    assert made.status_code == 201, made.text
    record = made.json()
    assert record["metadata"] == {"room": "cellar"} and record["tags"] == ["house"]
    assert record["event_time"] == "2024-10-01T09:00:00Z"
    assert record.pop("created") is True and record.pop("updates") == []
    assert record.pop("replaced") == []
    again = client.post(
        "/v1/memories", headers=headers, json={"content": "The boiler is serviced every October"}
    )
    assert again.status_code == 200
    assert again.json() == {**record, "created": False, "replaced": [], "updates": []}

    assert client.get(f"/v1/memories/{record['id']}", headers=headers).json() == record
    listed = client.get("/v1/memories", params={"limit": 5, "offset": 0}, headers=headers)
    assert listed.json() == {"memories": [record]}

    recalled = client.post("/v1/recall", headers=headers, json={"query": "boiler service", "k": 3})
    contract = recalled.json()
    assert recalled.status_code == 200
    assert contract["score_contract_version"] == "2"
    assert contract["calibration_status"] == "uncalibrated"
    assert contract["answer_confidence"] is None and "abstained" in contract
    top = contract["results"][0]
    assert top["id"] == record["id"] and top["rank_position"] == 1
    for field in ("relevance_score", "ranking_score", "memory_confidence", "trust_score"):
        assert isinstance(top[field], float)
    assert "trace" not in contract
    traced = client.post("/v1/recall", headers=headers, json={"query": "boiler", "trace": True})
    assert "trace" in traced.json()

    gone = client.delete(f"/v1/memories/{record['id']}", headers=headers)
    assert gone.status_code == 200 and gone.json() == {"forgotten": [record["id"]]}
    assert client.delete(f"/v1/memories/{record['id']}", headers=headers).status_code == 404
    assert error_of(client.get(f"/v1/memories/{record['id']}", headers=headers))["type"] == (
        "not_found"
    )


def test_batch_is_stored_all_or_nothing(client: httpx.Client) -> None:
    params = {"profile": "batch"}
    bad = {"memories": [{"content": "Deploys happen on Thursdays"}, {"content": "   "}]}
    refused = client.post("/v1/memories", params=params, json=bad)
    assert refused.status_code == 400
    assert error_of(refused)["field"] == "memories[1].content"
    assert memory_ids(client.get("/v1/memories", params=params)) == []

    good = {"memories": [{"content": "Deploys happen on Thursdays"}, {"content": "Tea at 4"}]}
    stored = client.post("/v1/memories", params=params, json=good)
    assert stored.status_code == 201
    assert [m["content"] for m in stored.json()["memories"]] == [
        "Deploys happen on Thursdays",
        "Tea at 4",
    ]
    again = client.post("/v1/memories", params=params, json=good["memories"][0])
    assert again.json()["id"] == stored.json()["memories"][0]["id"]


def test_health_and_openapi(client: httpx.Client) -> None:
    # A profile that holds nothing while others do is most likely a typo: 404, naming them.
    client.post("/v1/memories", params={"profile": "other"}, json={"content": "Bins on Tuesday"})
    missing = client.get("/v1/health", params={"profile": "healthy"})
    assert missing.status_code == 404
    assert "no profile 'healthy'" in error_of(missing)["message"]
    client.post("/v1/memories", params={"profile": "healthy"}, json={"content": "All fine"})
    health = client.get("/v1/health", params={"profile": "healthy"}).json()
    assert health["profile"] == "healthy" and health["memories"] == 1
    schema = client.get("/openapi.json").json()
    assert {"/v1/memories", "/v1/recall", "/v1/memories/{memory_id}", "/v1/health"} <= set(
        schema["paths"]
    )


def test_profiles_are_listed_and_deleted_only_when_confirmed(client: httpx.Client) -> None:
    for text in ("Bins go out on Tuesday", "The boiler is in the cellar"):
        client.post("/v1/memories", params={"profile": "chores"}, json={"content": text})
    listed = {p["name"]: p for p in client.get("/v1/profiles").json()["profiles"]}
    assert listed["chores"]["memories"] == 2 and listed["chores"]["last_write"].endswith("Z")
    refused = client.delete("/v1/profiles/chores")
    assert refused.status_code == 400 and error_of(refused)["field"] == "confirm"
    assert client.get("/v1/memories", params={"profile": "chores"}).status_code == 200
    done = client.delete("/v1/profiles/chores", params={"confirm": "chores"})
    assert done.json() == {"deleted": {"profile": "chores", "forgotten": 2}}
    names = [p["name"] for p in client.get("/v1/profiles").json()["profiles"]]
    assert "chores" not in names
    assert ids_in(client.get("/v1/memories", params={"profile": "chores"}), "memories") == []


# -- bad input is a 4xx that names the field ----------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/v1/memories", {}, "content"),
        ("POST", "/v1/memories", {"content": 42}, "content"),
        ("POST", "/v1/memories", {"content": ""}, "content"),
        ("POST", "/v1/memories", {"content": "x", "confidence": 1.5}, "confidence"),
        ("POST", "/v1/memories", {"content": "x", "event_time": "yesterday"}, "event_time"),
        ("POST", "/v1/memories", {"content": "x", "metadata": [1]}, "metadata"),
        ("POST", "/v1/memories", {"content": "x", "tags": "health"}, "tags"),
        ("POST", "/v1/memories", {"content": "x", "colour": "red"}, "colour"),
        ("POST", "/v1/memories", {"memories": [{"content": 1}]}, "memories[0].content"),
        ("POST", "/v1/memories", [{"content": "x"}], "body"),
        ("POST", "/v1/recall", {"query": "x", "k": 0}, "k"),
        ("POST", "/v1/recall", {"query": "x", "k": "5"}, "k"),
        ("POST", "/v1/recall", {"query": "\x00"}, "query"),
        ("POST", "/v1/recall", {"query": "x", "channels": ["nope"]}, "channels"),
        ("POST", "/v1/recall", {"query": "x", "after": "soon"}, "after"),
        ("GET", "/v1/memories?limit=0", None, "limit"),
        ("GET", "/v1/memories?offset=-1", None, "offset"),
        ("GET", "/v1/memories?limit=ten", None, "limit"),
        ("GET", "/v1/memories/NOT-AN-ID", None, "id"),
        ("DELETE", "/v1/memories/123", None, "id"),
        ("GET", "/v1/health?profile=no%20spaces", None, "profile"),
    ],
)
def test_invalid_input_is_400_naming_the_field(
    client: httpx.Client, method: str, path: str, body: Any, field: str
) -> None:
    response = client.request(method, path, json=body)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["type"] == "invalid_input"
    assert error["field"] == field, error


LONE = "\ud800"


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/v1/recall", {"query": "x", "metadata": {"a": LONE}}, "metadata"),
        ("POST", "/v1/recall", {"query": "x", "metadata": {LONE: ["a"]}}, "metadata"),
        ("POST", "/v1/recall", {"query": LONE}, "query"),
        ("POST", "/v1/memories", {"content": "x", "metadata": {"a": [{LONE: 1}]}}, "metadata"),
        ("POST", "/v1/memories", {"content": "x", "source": LONE}, "source"),
        ("POST", "/v1/memories", {"content": "x", "tags": [LONE]}, "tags"),
        ("POST", "/v1/conversations", {"messages": [{"role": LONE, "content": "hi"}]},
         "messages[0].role"),
        ("POST", "/v1/conversations",
         {"session": LONE, "messages": [{"role": "user", "content": "hi"}]}, "session"),
        ("GET", "/v1/memories?metadata=" + json.dumps({"a": LONE}), None, "metadata"),
    ],
)  # fmt: skip
def test_text_that_is_not_unicode_is_400_naming_the_field(
    client: httpx.Client, method: str, path: str, body: Any, field: str
) -> None:
    """A lone surrogate (JSON allows the escape, UTF-8 cannot carry it) is the caller's
    mistake, not the server's: a 400 naming the field, never a 500."""
    content = json.dumps(body).encode() if body is not None else None
    headers = {"content-type": "application/json", "X-SLM-Profile": "surrogates"}
    client.post("/v1/memories", json={"content": "x marks the spot"}, headers=headers)
    response = client.request(method, path, content=content, headers=headers)
    assert response.status_code == 400, response.text
    assert error_of(response)["field"] == field


def test_unparsable_bodies_are_400(client: httpx.Client) -> None:
    json_headers = {"content-type": "application/json"}
    broken = client.post("/v1/memories", content=b'{"content": ', headers=json_headers)
    assert broken.status_code == 400 and error_of(broken)["field"] == "body"
    deep = b"[" * 100_000 + b"]" * 100_000
    assert client.post("/v1/recall", content=deep, headers=json_headers).status_code == 400
    # A form post from a web page must not be read as JSON.
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        plain = client.post(
            "/v1/memories", content=b'{"content": "x"}', headers={"content-type": kind}
        )
        assert plain.status_code == 415 and error_of(plain)["field"] == "body"
        assert "Content-Type: application/json" in error_of(plain)["message"]
    no_type = client.post("/v1/recall", content=b'{"query": "x"}')
    assert no_type.status_code == 415
    typed = {"content-type": "application/json; charset=utf-8", "X-SLM-Profile": "typed"}
    client.post("/v1/memories", json={"content": "x marks the spot"}, headers=typed)
    assert client.post("/v1/recall", content=b'{"query": "x"}', headers=typed).status_code == 200


def test_a_batch_says_which_memories_are_new(client: httpx.Client) -> None:
    headers = {"X-SLM-Profile": "batch-news"}
    first = client.post("/v1/memories", headers=headers, json={"content": "alpha"})
    assert first.status_code == 201
    batch = {"memories": [{"content": "alpha"}, {"content": "beta"}, {"content": "beta"}]}
    made = client.post("/v1/memories", headers=headers, json=batch)
    assert made.status_code == 201
    assert [m["created"] for m in made.json()["memories"]] == [False, True, False]
    repeat = client.post("/v1/memories", headers=headers, json=batch)
    assert repeat.status_code == 200
    assert [m["created"] for m in repeat.json()["memories"]] == [False, False, False]


def test_interactive_docs_are_served_offline(client: httpx.Client) -> None:
    page = client.get("/docs")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "https://" not in page.text  # what the browser shows: tests/test_web.py
    for asset in ("/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"):
        assert client.get(asset).status_code == 200, asset
    assert "/docs" not in client.get("/openapi.json").json()["paths"]


def test_unknown_route_and_method_are_json(client: httpx.Client) -> None:
    assert error_of(client.get("/v1/nothing"))["type"] == "not_found"
    refused = client.put("/v1/health")
    assert refused.status_code == 405 and error_of(refused)["type"] == "method_not_allowed"


def test_oversized_body_is_413(client: httpx.Client) -> None:
    big = {"content": "x" * (1024 * 1024 + 1)}
    assert client.post("/v1/memories", json=big).status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit must hold while streaming
        yield b'{"content": "'
        for _ in range(40):
            yield b"y" * 64 * 1024
        yield b'"}'

    streamed = client.post(
        "/v1/memories", content=chunks(), headers={"content-type": "application/json"}
    )
    assert streamed.status_code == 413 and error_of(streamed)["type"] == "too_large"


def test_feedback_is_recorded_listed_refused_and_reset(client: httpx.Client) -> None:
    headers = {"X-SLM-Profile": "feedback"}
    made = client.post(
        "/v1/memories", headers=headers, json={"content": "The boiler is serviced in May"}
    ).json()
    found = client.post("/v1/recall", headers=headers, json={"query": "boiler service"}).json()
    body = {"memory_id": made["id"], "useful": True, "query_id": found["query_id"]}
    told = client.post("/v1/feedback", headers=headers, json=body)
    assert told.status_code == 201 and told.json()["query_id"] == found["query_id"]
    listed = client.get("/v1/feedback", headers=headers).json()["feedback"]
    assert [(e["memory_id"], e["useful"]) for e in listed] == [(made["id"], True)]
    unknown = client.post("/v1/feedback", headers=headers, json={**body, "query_id": "c" * 32})
    assert unknown.status_code == 404 and "no recall" in error_of(unknown)["message"]
    other = client.post("/v1/feedback", headers={"X-SLM-Profile": "elsewhere"}, json=body)
    assert other.status_code == 404
    bad = client.post("/v1/feedback", headers=headers, json={**body, "query_id": "x"})
    assert bad.status_code == 400 and error_of(bad)["field"] == "query_id"
    typed = client.post("/v1/feedback", headers=headers, json={**body, "useful": "yes"})
    assert typed.status_code == 400 and error_of(typed)["field"] == "useful"
    assert client.delete("/v1/feedback", headers=headers).json() == {"forgotten": 1}
    assert client.get("/v1/feedback", headers=headers).json() == {"feedback": []}


# -- profiles, hosts and tokens -----------------------------------------------------------------


def memory_ids(response: httpx.Response) -> list[str]:
    return ids_in(response, "memories")


def ids_in(response: httpx.Response, key: str) -> list[str]:
    """The ids a listing or recall answered with; none when the profile holds nothing (a 404
    that names the profiles that do exist)."""
    if response.status_code == 404:
        assert "no profile" in error_of(response)["message"]
        return []
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()[key]]


def test_profiles_are_isolated(client: httpx.Client) -> None:
    alice = {"X-SLM-Profile": "alice"}
    record = client.post(
        "/v1/memories", headers=alice, json={"content": "Alice's locker is 42"}
    ).json()
    assert record.pop("created") is True and record.pop("updates") == []
    assert record.pop("replaced") == []
    memory_id = record["id"]
    for other in ({"X-SLM-Profile": "bob"}, {}):
        listed = client.get("/v1/memories", headers=other)
        assert memory_id not in ids_in(listed, "memories")
        recalled = client.post("/v1/recall", headers=other, json={"query": "Alice locker"})
        assert memory_id not in ids_in(recalled, "results")
        assert client.get(f"/v1/memories/{memory_id}", headers=other).status_code == 404
        assert client.delete(f"/v1/memories/{memory_id}", headers=other).status_code == 404
    assert client.get(f"/v1/memories/{memory_id}", params={"profile": "alice"}).json() == record
    same = client.get(f"/v1/memories/{memory_id}", params={"profile": "alice"}, headers=alice)
    assert same.status_code == 200
    clash = client.get("/v1/memories", params={"profile": "bob"}, headers=alice)
    assert clash.status_code == 400 and error_of(clash)["field"] == "profile"


profile_names = st.from_regex(r"[A-Za-z0-9_.-]{1,64}", fullmatch=True)


@given(first=profile_names, second=profile_names, text=st.text(min_size=1, max_size=200))
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
def test_no_profile_sees_another(api: str, first: str, second: str, text: str) -> None:
    assume(first != second and text.strip() and "\x00" not in text)
    with httpx.Client(base_url=api, timeout=10.0) as http:
        made = http.post("/v1/memories", params={"profile": first}, json={"content": text})
        assume(made.status_code in (200, 201))  # text the library refuses is covered elsewhere
        memory_id = made.json()["id"]
        other = {"profile": second}
        listed = http.get("/v1/memories", params={**other, "limit": 10_000})
        assert memory_id not in ids_in(listed, "memories")
        recalled = http.post("/v1/recall", params=other, json={"query": text, "k": 1000})
        assert memory_id not in ids_in(recalled, "results")
        assert http.get(f"/v1/memories/{memory_id}", params=other).status_code == 404
        assert http.delete(f"/v1/memories/{memory_id}", params=other).status_code == 404
        assert http.get(f"/v1/memories/{memory_id}", params={"profile": first}).status_code == 200


def test_evicted_profiles_close_only_when_idle(tmp_path: Path) -> None:
    profiles = Profiles(Location(path=tmp_path / "pool.db"), Settings(embedder="fake"), limit=1)
    with profiles.lease("a") as first:
        first.remember("kept open while in use")
        with profiles.lease("b") as second:  # evicts "a" from the pool, but "a" is in use
            assert second.count() == 0
        assert first.count() == 1
    with pytest.raises(StoreError):
        first.count()
    with profiles.lease("a") as reopened:
        assert reopened is not first and reopened.count() == 1
    profiles.close()


def test_foreign_host_names_are_refused(client: httpx.Client) -> None:
    # A page on evil.example that rebinds its name to 127.0.0.1 still sends its own Host.
    rebound = client.get("/v1/health", headers={"host": "evil.example"})
    assert rebound.status_code == 400 and error_of(rebound)["type"] == "invalid_host"
    named = client.get("/v1/health", headers={"host": "localhost:1"})
    assert named.status_code != 400 or error_of(named)["type"] != "invalid_host"


def test_token_is_required_when_set(secured: str) -> None:
    with httpx.Client(base_url=secured, timeout=10.0) as http:
        assert http.get("/openapi.json").status_code == 200
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
            refused = http.get("/v1/health", headers=headers)
            assert refused.status_code == 401 and error_of(refused)["type"] == "unauthorized"
            assert refused.headers["www-authenticate"] == "Bearer"
        ok = http.get("/v1/health", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200


def test_refuses_a_public_host_without_token(tmp_path: Path) -> None:
    command = slm(tmp_path / "x.db", "serve", "--host", "0.0.0.0", "--port", str(free_port()))
    done = subprocess.run(
        command, env=server_env(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0 and "SLM_API_TOKEN" in done.stderr


@pytest.mark.parametrize(
    ("command", "blocked", "extra"), [("serve", "fastapi", "server"), ("mcp", "mcp", "mcp")]
)
def test_missing_extra_names_it(tmp_path: Path, command: str, blocked: str, extra: str) -> None:
    script = (
        f"import sys; sys.modules[{blocked!r}] = None; import slm; from slm.cli import main; "
        f"sys.argv = ['slm', '--db', {str(tmp_path / 'x.db')!r}, {command!r}]; main()"
    )
    env = server_env(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert f"pip install '.[{extra}]'" in done.stderr and "Traceback" not in done.stderr


def test_importing_slm_loads_no_adapter_dependency() -> None:
    script = "import sys, slm; print(sorted({'fastapi', 'uvicorn', 'mcp'} & set(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


# -- property-based fuzz of the OpenAPI schema --------------------------------------------------


OPERATIONS = [
    ("POST", "/v1/memories"),
    ("POST", "/v1/recall"),
    ("GET", "/v1/memories"),
    ("GET", "/v1/memories/{memory_id}"),
    ("DELETE", "/v1/memories/{memory_id}"),
    ("DELETE", "/v1/memories"),
    ("GET", "/v1/memories/{memory_id}/history"),
    ("PATCH", "/v1/memories/{memory_id}"),
    ("DELETE", "/v1/memories/{memory_id}/replaced-by/{newer_id}"),
    ("GET", "/v1/health"),
    ("POST", "/v1/feedback"),
    ("GET", "/v1/feedback"),
    ("DELETE", "/v1/feedback"),
    ("GET", "/v1/profiles"),
    ("POST", "/v1/conversations"),
    ("DELETE", "/v1/profiles/{name}"),
]


@pytest.fixture(scope="module")
def api_schema(api: str) -> Any:
    return schemathesis.openapi.from_url(f"{api}/openapi.json")


def test_fuzz_covers_every_operation(api_schema: Any) -> None:
    found = {(op.ok().method.upper(), op.ok().path) for op in api_schema.get_all_operations()}
    assert found == set(OPERATIONS)


# Hypothesis drives schemathesis's strategies directly: its pytest plugin's own parametrize
# does not run on pytest 9. Two checks are off. positive_data_acceptance: the schema gives
# types and bounds, but the value rules (byte limits, blank text, ISO 8601) live in the
# library, so some schema-valid bodies are rightly refused with 400. negative_data_rejection:
# in a query string a "schema-violating" boolean or repeated parameter is indistinguishable
# from a valid string (tag=false), so it fails on requests that are in fact valid.
@pytest.mark.parametrize(
    ("method", "path", "mode"),
    [
        (method, path, mode)
        for method, path in OPERATIONS
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
        # A route without parameters has no invalid request to generate.
        if not (path == "/v1/profiles" and mode == GenerationMode.NEGATIVE)
    ],
)
def test_fuzz_never_5xx_and_matches_schema(
    api_schema: Any, method: str, path: str, mode: GenerationMode
) -> None:
    @given(case=api_schema[path][method].as_strategy(mode))
    @settings(
        max_examples=40,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        case.call_and_validate(excluded_checks=[positive_data_acceptance, negative_data_rejection])

    check()


def test_patch_replaces_a_memory(client: httpx.Client) -> None:
    headers = {"X-SLM-Profile": "patching"}
    old = client.post(
        "/v1/memories",
        headers=headers,
        json={"content": "I live in Berlin", "event_time": "2022-01-01", "tags": ["home"]},
    ).json()
    made = client.patch(
        f"/v1/memories/{old['id']}",
        headers=headers,
        json={"content": "I live in Lisbon", "event_time": "2024-03-01"},
    )
    assert made.status_code == 201, made.text
    new = made.json()
    assert new["tags"] == ["home"] and new["valid_from"] == "2024-03-01T00:00:00Z"
    stale = client.get(f"/v1/memories/{old['id']}", headers=headers).json()
    assert stale["superseded_by"] == new["id"] and stale["valid_to"] == "2024-03-01T00:00:00Z"

    now = client.post("/v1/recall", headers=headers, json={"query": "where do I live"}).json()
    assert [r["id"] for r in now["results"]] == [new["id"]]
    then = client.post(
        "/v1/recall", headers=headers, json={"query": "where do I live", "as_of": "2023-01-01"}
    ).json()
    assert [r["id"] for r in then["results"]] == [old["id"]]
    both = client.post(
        "/v1/recall",
        headers=headers,
        json={"query": "where do I live", "include_superseded": True},
    ).json()
    assert {r["id"]: r["superseded_by"] for r in both["results"]} == {
        new["id"]: None,
        old["id"]: new["id"],
    }

    again = client.patch(
        f"/v1/memories/{old['id']}", headers=headers, json={"content": "I live in Porto"}
    )
    assert again.status_code == 400 and "already superseded" in error_of(again)["message"]
    missing = client.patch("/v1/memories/0123456789abcdef", headers=headers, json={"content": "x"})
    assert missing.status_code == 404 and error_of(missing)["type"] == "not_found"
    other = client.patch(f"/v1/memories/{new['id']}", json={"content": "elsewhere"})
    assert other.status_code == 404  # another profile's memory is not found
    empty = client.patch(f"/v1/memories/{new['id']}", headers=headers, json={"content": ""})
    assert empty.status_code == 400 and error_of(empty)["field"] == "content"
    listed = client.get("/v1/memories", headers=headers).json()["memories"]
    assert len(listed) == 2

    undo = f"/v1/memories/{old['id']}/replaced-by/{new['id']}"
    undone = client.delete(undo, headers=headers)
    assert undone.status_code == 200, undone.text
    assert undone.json() == {"unlinked": {"older": old["id"], "newer": new["id"]}}
    assert client.get(f"/v1/memories/{old['id']}", headers=headers).json()["valid_to"] is None
    twice = client.delete(undo, headers=headers)
    assert twice.status_code == 400 and "no link to undo" in error_of(twice)["message"]
    assert client.delete(undo).status_code == 404  # another profile


def test_serve_says_the_address_it_listens_on(tmp_path: Path) -> None:
    """As ``slm ui`` does: with ``--port 0`` the address printed is the only way to know it."""
    import threading

    command = slm(tmp_path / "said.db", "serve", "--port", "0")
    process = subprocess.Popen(
        command, env=server_env(tmp_path), stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    said: list[str] = []
    assert process.stderr is not None
    threading.Thread(target=lambda: said.extend(process.stderr or ()), daemon=True).start()
    try:
        for _ in range(600):
            if any("http://" in line for line in said) or process.poll() is not None:
                break
            time.sleep(0.1)
        (line,) = [line for line in said if "http://" in line]
        url = line.split(" at ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/") and ":0/" not in url
        assert httpx.get(f"{url}v1/health", timeout=10.0).status_code == 200
    finally:
        stop(process)


def test_a_busy_port_is_one_line_and_status_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            slm(tmp_path / "busy.db", "serve", "--port", str(port)),
            env=server_env(tmp_path), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: cannot listen on")
    assert "already in use" in done.stderr


def test_the_documented_errors_are_what_the_server_says(client: httpx.Client) -> None:
    import json
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "integrations.md").read_text()
    block = text[text.index("### Errors") :]
    documented = [json.loads(line) for line in re.search(r"```json\n(.*?)```", block, re.S)
                  .group(1).splitlines()]  # type: ignore[union-attr]  # fmt: skip
    headers = {"X-SLM-Profile": "default"}
    client.post("/v1/memories", headers=headers, json={"content": "Priya is allergic to cats"})
    said = [
        client.post("/v1/memories", headers=headers,
                    json={"memories": [{"content": "ok"}, {"content": 5}]}),
        client.post("/v1/recall", headers=headers, json={"query": "x", "k": 0}),
        client.get("/v1/memories/3f2a9c0d1e4b5a67", headers=headers),
    ]  # fmt: skip
    assert [response.json() for response in said] == documented


def test_a_conversation_is_stored_as_it_is(client: httpx.Client) -> None:
    headers = {"X-SLM-Profile": "chat"}
    body = {
        "session": "s1",
        "messages": [
            {"role": "user", "name": "Maya", "content": "I live in Porto.", "time": "2024-03-01"},
            {"role": "assistant", "content": [{"type": "text", "text": "Noted, Porto."}]},
        ],
    }
    made = client.post("/v1/conversations", headers=headers, json=body)
    assert made.status_code == 201, made.text
    stored = made.json()["memories"]
    assert [m["content"] for m in stored] == ["Maya: I live in Porto.", "assistant: Noted, Porto."]
    assert stored[0]["metadata"] == {"role": "user", "message": 0, "session": "s1"}
    assert client.post("/v1/conversations", headers=headers, json=body).status_code == 200
    bad = {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": 5}]}
    refused = client.post("/v1/conversations", headers=headers, json=bad)
    assert refused.status_code == 400 and error_of(refused)["field"].startswith("messages[1]")


def test_a_conversation_s_system_messages_are_skipped_or_kept(client: httpx.Client) -> None:
    headers = {"X-SLM-Profile": "chat-system"}
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Standup moved to 9:30."},
    ]
    made = client.post("/v1/conversations", headers=headers, json={"messages": messages})
    assert made.status_code == 201, made.text
    assert made.json()["system_skipped"] == 1
    assert [m["content"] for m in made.json()["memories"]] == ["user: Standup moved to 9:30."]
    body = {"messages": messages, "system": "keep"}
    kept = client.post("/v1/conversations", headers=headers, json=body).json()
    assert kept["system_skipped"] == 0
    assert [(m["source"], m["created"]) for m in kept["memories"]] == [
        ("system", True),
        ("user", False),
    ]
    refused = client.post("/v1/conversations", headers=headers, json={**body, "system": "x"})
    assert refused.status_code == 400 and error_of(refused)["field"] == "system"


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"role": "root; DROP", "content": "hi"}, "messages[1].role"),
        ({"role": "user", "name": "Ma\u202eya", "content": "hi"}, "messages[1].name"),
        ({"role": "user", "name": "Ma\u0000ya", "content": "hi"}, "messages[1].name"),
    ],
)
def test_a_conversation_s_bad_role_or_name_is_reported_as_itself(
    client: httpx.Client, message: dict[str, Any], field: str
) -> None:
    """The error names the message's field, not ``content`` (in which the speaker's name
    would be), nor a batch's ``memories[i]``."""
    body = {"messages": [{"role": "user", "content": "Hello."}, message]}
    refused = client.post("/v1/conversations", headers={"X-SLM-Profile": "chat-bad"}, json=body)
    assert refused.status_code == 400, refused.text
    error = error_of(refused)
    assert error["field"] == field and error["message"].startswith(f"{field}: ")


def test_metadata_filters_on_recall_and_list(client: httpx.Client) -> None:
    headers = {"X-SLM-Profile": "scoped"}
    notes = [
        {"content": f"note {i} about the deploy checklist", "metadata": {"user_id": f"u{i % 3}"}}
        for i in range(9)
    ]
    client.post("/v1/memories", headers=headers, json={"memories": notes})
    rule = {"user_id": ["u1", "u2"]}
    recalled = client.post(
        "/v1/recall", headers=headers, json={"query": "deploy checklist", "k": 9, "metadata": rule}
    ).json()["results"]
    assert len(recalled) == 6 and all(r["metadata"]["user_id"] != "u0" for r in recalled)
    listed = client.get(
        "/v1/memories", headers=headers, params={"metadata": json.dumps({"user_id": "u0"})}
    )
    assert {m["metadata"]["user_id"] for m in listed.json()["memories"]} == {"u0"}
    bad = client.get("/v1/memories", headers=headers, params={"metadata": "[1]"})
    assert bad.status_code == 400 and error_of(bad)["field"] == "metadata"


def test_recall_leaves_out_what_is_below_a_minimum_relevance(client: httpx.Client) -> None:
    headers = {"X-SLM-Profile": "floors"}
    notes = ["The boiler is serviced every October", "The boiler pressure stays near 1.5 bar"]
    client.post("/v1/memories", headers=headers, json={"memories": [{"content": n} for n in notes]})
    ask = {"query": "boiler service"}
    every = client.post("/v1/recall", headers=headers, json=ask).json()
    assert every["results"]
    low = client.post("/v1/recall", headers=headers, json={**ask, "min_relevance": 0}).json()
    assert [r["id"] for r in low["results"]] == [r["id"] for r in every["results"]]
    top = max(r["relevance_score"] for r in every["results"])
    above = {**ask, "min_relevance": (top + 1) / 2}
    none = client.post("/v1/recall", headers=headers, json=above).json()
    assert none["results"] == [] and none["abstained"] is True
    assert none["abstention_reason"] == "evidence_floor"
    for bad, said in ((1.5, "min_relevance must be in 0..1"), ("high", "valid number")):
        refused = client.post("/v1/recall", headers=headers, json={**ask, "min_relevance": bad})
        assert refused.status_code == 400
        error = error_of(refused)
        assert error["type"] == "invalid_input" and error["field"] == "min_relevance"
        assert said in error["message"]


def test_users_by_name_on_every_endpoint(client: httpx.Client) -> None:
    """Issue 61: the owner in the body and the query string; a query parameter no
    operation takes is a 400 naming it, never a listing of everyone."""
    headers = {"X-SLM-Profile": "users"}
    chat = [{"role": "user", "content": "I live in Porto."}, {"role": "user", "content": "Hi"}]
    mine = {}
    for user in ("alice", "bob"):
        made = client.post(
            "/v1/memories", headers=headers, json={"content": "I am a nurse", "user_id": user}
        )
        assert made.status_code == 201 and made.json()["metadata"] == {"user_id": user}
        mine[user] = made.json()["id"]
        talk = client.post(
            "/v1/conversations",
            headers=headers,
            json={"messages": chat, "user_id": user, "metadata": {"app": "rest"}},
        )
        assert talk.status_code == 201, talk.text
        for stored in talk.json()["memories"]:
            assert stored["created"] and stored["metadata"]["user_id"] == user
            assert stored["metadata"]["app"] == "rest"
    batch = client.post(
        "/v1/memories",
        headers=headers,
        json={"memories": [{"content": "Likes tea", "user_id": "carol", "run_id": 7}]},
    )
    assert batch.json()["memories"][0]["metadata"] == {"user_id": "carol", "run_id": 7}

    listed = client.get("/v1/memories", headers=headers, params={"user_id": "erin"})
    assert listed.status_code == 200 and listed.json() == {"memories": []}
    # the store's other scope keys are parameters by name (lg_ns.* is one of the default keys)
    other = client.get("/v1/memories", headers=headers, params={"lg_ns.0": "users"})
    assert other.status_code == 200 and other.json() == {"memories": []}
    alice = client.get("/v1/memories", headers=headers, params={"user_id": "alice"}).json()
    assert {m["metadata"]["user_id"] for m in alice["memories"]} == {"alice"}
    assert len(alice["memories"]) == 3
    recalled = client.post("/v1/recall", headers=headers, json={"query": "nurse", "user_id": "bob"})
    assert [r["id"] for r in recalled.json()["results"]] == [mine["bob"]]
    for method, path, params in (
        ("GET", "/v1/memories", {"usr_id": "erin"}),
        ("POST", "/v1/recall", {"user_id": "bob"}),  # the recall's options are its body
        ("DELETE", "/v1/memories", {"usr_id": "alice"}),
        ("GET", f"/v1/memories/{mine['bob']}", {"verbose": "1"}),
    ):
        body = {"query": "nurse"} if method == "POST" else None
        refused = client.request(method, path, headers=headers, params=params, json=body)
        assert refused.status_code == 400, (path, refused.text)
        assert error_of(refused)["field"] == next(iter(params))
    conflict = client.post(
        "/v1/recall",
        headers=headers,
        json={"query": "nurse", "user_id": "bob", "metadata": {"user_id": "alice"}},
    )
    assert conflict.status_code == 400 and error_of(conflict)["field"] == "user_id"

    # forget a user: a dry run counts, then everything of theirs goes, nothing of bob's
    everything = client.delete("/v1/memories", headers=headers)
    assert everything.status_code == 400
    counted = client.delete(
        "/v1/memories", headers=headers, params={"user_id": "alice", "dry_run": "true"}
    )
    assert counted.json()["count"] == 3 and counted.json()["dry_run"] is True
    gone = client.delete("/v1/memories", headers=headers, params={"user_id": "alice"})
    assert gone.status_code == 200 and gone.json()["count"] == 3
    assert client.get("/v1/memories", headers=headers, params={"user_id": "alice"}).json() == {
        "memories": []
    }
    assert (
        len(
            client.get("/v1/memories", headers=headers, params={"user_id": "bob"}).json()[
                "memories"
            ]
        )
        == 3
    )
    assert client.get(f"/v1/memories/{mine['bob']}", headers=headers).status_code == 200

    # history: the old id is one call from what replaced it
    newer = client.patch(
        f"/v1/memories/{mine['bob']}", headers=headers, json={"content": "I am a doctor"}
    ).json()
    told = client.get(f"/v1/memories/{mine['bob']}/history", headers=headers).json()
    assert told["current"] == newer["id"]
    assert [(ln["newer"]["id"], ln["kind"]) for ln in told["replaced_by"]] == [
        (newer["id"], "stated")
    ]
    missing = client.get("/v1/memories/0123456789abcdef/history", headers=headers)
    assert missing.status_code == 404
    wiped = client.delete("/v1/memories", headers=headers, params={"all": "true"})
    assert wiped.json()["count"] == 5
