"""``slm mcp`` as a subprocess, driven over stdio by the MCP SDK's own client."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, TextContent

import slm

TOOLS = {
    "remember",
    "remember_conversation",
    "update",
    "unlink",
    "recall",
    "forget",
    "feedback",
    "get",
    "history",
    "list_recent",
    "trace",
    "health",
    "profiles",
}


#: The slm under test, for the server: the SDK starts it with a bare environment.
SRC = str(Path(slm.__file__).resolve().parents[1])


def run_session(
    home: Path,
    scenario: Callable[[Client], Awaitable[None]],
    *args: str,
    after: list[str] | None = None,
    **env: str,
) -> None:
    """Start ``slm mcp`` with the fake embedder, run ``scenario`` against it, shut it down;
    ``args`` go before the command name, ``after`` after it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "slm", "--db", str(home / "mcp.db"), *args, "mcp", *(after or [])],
        env={"SLM_EMBEDDER": "fake", "SLM_HOME": str(home), "PYTHONPATH": SRC, **env},
    )

    async def main() -> None:
        with anyio.fail_after(60):
            async with Client(params, read_timeout_seconds=30) as client:
                await scenario(client)

    anyio.run(main)


def data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    # Clients that ignore structured content get the same object as JSON text.
    first = result.content[0]
    assert isinstance(first, TextContent)
    assert json.loads(first.text) == result.structured_content
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    first = result.content[0]
    assert isinstance(first, TextContent)
    return first.text


def test_tools_are_listed_with_guidance(tmp_path: Path) -> None:
    async def scenario(client: Client) -> None:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) == TOOLS
        assert "worth remembering" in (listed["remember"].description or "").lower()
        assert "phrase the query" in (listed["recall"].description or "").lower()
        assert listed["recall"].input_schema["required"] == ["query"]
        assert "required" not in listed["forget"].input_schema  # ids, or user_id
        for name in ("remember", "remember_conversation", "recall", "forget", "list_recent"):
            described = listed[name].input_schema["properties"]["user_id"]["description"]
            assert described.startswith("user_id: "), name
        assert "user_id" in (listed["recall"].description or "")
        for tool in listed.values():
            assert tool.input_schema.get("additionalProperties") is False, tool.name
            assert len(tool.description or "") < 500, tool.name
        k = listed["recall"].input_schema["properties"]["k"]
        assert (k["minimum"], k["maximum"]) == (1, 1000)
        assert set(listed["recall"].input_schema["properties"]) >= {
            "source", "tags", "after", "before"
        }  # fmt: skip
        confidence = listed["remember"].input_schema["properties"]["confidence"]
        assert (confidence["minimum"], confidence["maximum"]) == (0, 1)
        limit = listed["list_recent"].input_schema["properties"]["limit"]
        assert (limit["minimum"], limit["maximum"]) == (1, 10_000)
        # The tool table in docs/integrations.md says what the running server offers.
        documented = documented_tools()
        assert set(documented) == set(listed)
        for name, tool in listed.items():
            named = {arg.rstrip("?") for arg in documented[name]}
            assert named == set(tool.input_schema["properties"]), name
            required = {arg for arg in documented[name] if not arg.endswith("?")}
            assert required == set(tool.input_schema.get("required", [])), name

    run_session(tmp_path, scenario)


def documented_tools() -> dict[str, list[str]]:
    """The MCP tool table of docs/integrations.md: each tool and the arguments it names."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "integrations.md").read_text()
    table = text[text.index("| tool | arguments |") :].split("\n\n", 1)[0]
    tools = {}
    for row in table.splitlines()[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        tools[cells[0].strip("`")] = re.findall(r"`([a-z_]+\??)`", cells[1])
    return tools


def test_the_readme_names_every_tool() -> None:
    """The README's paragraph on ``slm mcp`` lists the tools the server offers (``TOOLS``,
    checked against the running server above)."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    paragraph = text[text.index("`slm mcp` serves one profile") :].split("\n\n", 1)[0]
    assert {name for name in TOOLS if f"`{name}`" in paragraph} == TOOLS


def test_server_reports_its_version(tmp_path: Path) -> None:
    import slm

    async def scenario(client: Client) -> None:
        info = client.server_info
        assert info is not None and info.name == "slm" and info.version == slm.__version__

    run_session(tmp_path, scenario)


def test_recall_filters_and_a_repeat_remember(tmp_path: Path) -> None:
    async def scenario(client: Client) -> None:
        first = data(
            await client.call_tool(
                "remember",
                {"content": "Standup is at nine", "source": "work", "tags": ["office"],
                 "event_time": "2024-05-02T09:00:00Z"},
            )
        )  # fmt: skip
        assert first["created"] is True
        again = data(await client.call_tool("remember", {"content": "Standup is at nine"}))
        assert again["created"] is False and again["id"] == first["id"]
        await client.call_tool(
            "remember", {"content": "Football is at nine on Sundays", "source": "home"}
        )
        query = {"query": "what is at nine?"}
        by_source = data(await client.call_tool("recall", {**query, "source": "home"}))
        assert [r["source"] for r in by_source["results"]] == ["home"]
        by_tag = data(await client.call_tool("recall", {**query, "tags": ["office"]}))
        assert [r["id"] for r in by_tag["results"]] == [first["id"]]
        window = {**query, "after": "2024-05-01T00:00:00Z", "before": "2024-05-03T00:00:00Z"}
        assert [r["id"] for r in data(await client.call_tool("recall", window))["results"]] == [
            first["id"]
        ]

    run_session(tmp_path, scenario)


def test_remember_recall_get_list_trace_forget(tmp_path: Path) -> None:
    async def scenario(client: Client) -> None:
        stored = data(
            await client.call_tool(
                "remember",
                {
                    "content": "Priya is allergic to cats",
                    "source": "chat",
                    "event_time": "2024-03-09T18:40:00Z",
                    "confidence": 0.9,
                    "metadata": {"session": 4},
                    "tags": ["health"],
                },
            )
        )
        assert stored["tags"] == ["health"] and stored["metadata"] == {"session": 4}
        await client.call_tool("remember", {"content": "Deploys happen on Thursdays"})

        contract = data(await client.call_tool("recall", {"query": "Priya cats allergy", "k": 5}))
        assert contract["score_contract_version"] == "2"
        assert contract["calibration_status"] == "uncalibrated"
        assert contract["answer_confidence"] is None and contract["abstained"] is False
        top = contract["results"][0]
        assert top["id"] == stored["id"] and top["rank_position"] == 1
        for field in ("relevance_score", "ranking_score", "memory_confidence", "trust_score"):
            assert field in top
        assert "trace" not in contract
        assert "trace" in data(await client.call_tool("trace", {"query": "Priya cats"}))

        assert stored.pop("created") is True and stored.pop("updates") == []
        assert stored.pop("replaced") == []
        assert data(await client.call_tool("get", {"id": stored["id"]})) == stored
        recent = data(await client.call_tool("list_recent", {"limit": 1}))["memories"]
        assert [m["content"] for m in recent] == ["Deploys happen on Thursdays"]

        missing = "0123456789abcdef"
        forgotten = data(await client.call_tool("forget", {"ids": [stored["id"], missing]}))
        assert forgotten == {"forgotten": [stored["id"]], "not_found": [missing]}
        assert "not found" in error_text(await client.call_tool("get", {"id": stored["id"]}))
        assert data(await client.call_tool("health", {}))["memories"] == 1

    run_session(tmp_path, scenario)


def test_users_by_name_conversations_forget_and_history(tmp_path: Path) -> None:
    chat = [
        {"role": "user", "content": "I live in Porto."},
        {"role": "assistant", "content": "Noted, Porto."},
    ]

    async def scenario(client: Client) -> None:
        for user in ("alice", "bob"):
            done = data(
                await client.call_tool(
                    "remember_conversation",
                    {"messages": chat, "user_id": user, "metadata": {"app": "mcp"}},
                )
            )
            assert all(m["metadata"]["user_id"] == user for m in done["memories"])
            assert all(m["metadata"]["app"] == "mcp" for m in done["memories"])
            assert all(m["created"] for m in done["memories"])
        mine = data(
            await client.call_tool("remember", {"content": "I am a nurse", "user_id": "bob"})
        )
        found = data(await client.call_tool("recall", {"query": "nurse", "user_id": "bob"}))
        assert [r["id"] for r in found["results"]] == [mine["id"]]
        assert (
            data(await client.call_tool("recall", {"query": "nurse", "user_id": "alice"}))[
                "results"
            ]
            == []
        )
        listed = data(await client.call_tool("list_recent", {"user_id": "alice"}))["memories"]
        assert len(listed) == 2
        counted = data(await client.call_tool("forget", {"user_id": "alice", "dry_run": True}))
        assert counted["count"] == 2
        gone = data(await client.call_tool("forget", {"user_id": "alice"}))
        assert sorted(gone["forgotten"]) == sorted(m["id"] for m in listed)
        assert data(await client.call_tool("list_recent", {"user_id": "bob"}))["memories"]
        refused = error_text(await client.call_tool("forget", {}))
        assert "forget needs ids" in refused
        both = {"ids": [mine["id"]], "user_id": "bob"}
        assert "not both" in error_text(await client.call_tool("forget", both))
        typo = error_text(await client.call_tool("recall", {"query": "x", "usr_id": "bob"}))
        assert "usr_id" in typo
        newer = data(
            await client.call_tool("update", {"id": mine["id"], "content": "I am a doctor"})
        )
        told = data(await client.call_tool("history", {"id": mine["id"]}))
        assert told["current"] == newer["id"]
        assert [ln["kind"] for ln in told["replaced_by"]] == ["stated"]

    run_session(tmp_path, scenario)


def test_invalid_calls_are_tool_errors_and_the_server_lives_on(tmp_path: Path) -> None:
    async def scenario(client: Client) -> None:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("recall", {"query": "x", "k": 0}, "greater than or equal to 1"),
            ("recall", {"query": "x", "k": 1001}, "less than or equal to 1000"),
            ("recall", {"query": "x", "tags": "health"}, "tags"),
            ("recall", {"query": "x", "after": "soon"}, "after is not an ISO 8601"),
            ("recall", {"query": "x", "limit": 3}, "Extra inputs are not permitted"),
            ("list_recent", {"limit": 0}, "greater than or equal to 1"),
            ("recall", {"query": "x", "k": "many"}, "k"),
            ("recall", {}, "query"),
            ("remember", {"content": "   "}, "content is empty"),
            ("remember", {"content": "x", "confidence": 7}, "less than or equal to 1"),
            ("remember", {"content": "x", "tag": ["typo"]}, "Extra inputs are not permitted"),
            ("remember", {"content": "x", "event_time": "soon"}, "event_time"),
            ("get", {"id": "not-an-id"}, "memory id must be"),
            ("forget", {"ids": "zz"}, "ids"),
            ("no_such_tool", {}, "no_such_tool"),
        ]
        for name, arguments, expected in cases:
            message = error_text(await client.call_tool(name, arguments))
            assert expected in message, (name, arguments, message)
            # One line that says what was wrong: no pydantic dump, no web address.
            assert "\n" not in message and "pydantic" not in message, message
        assert data(await client.call_tool("health", {}))["memories"] == 0

    run_session(tmp_path, scenario)


def test_profile_from_flag_and_environment(tmp_path: Path) -> None:
    async def remember_in_profile(client: Client) -> None:
        assert data(await client.call_tool("health", {}))["profile"] == "work"
        await client.call_tool("remember", {"content": "The office opens at 8"})

    async def sees_nothing_else(client: Client) -> None:
        # "home" holds nothing while "work" does: reading it names the profiles that exist.
        refused = await client.call_tool("health", {})
        assert refused.is_error
        assert isinstance(refused.content[0], TextContent)
        assert "no profile 'home'" in refused.content[0].text
        assert "work (1)" in refused.content[0].text
        listed = data(await client.call_tool("profiles", {}))["profiles"]
        assert [(p["name"], p["memories"]) for p in listed] == [("work", 1)]

    run_session(tmp_path, remember_in_profile, "--profile", "work")
    run_session(tmp_path, sees_nothing_else, SLM_PROFILE="home")
    run_session(tmp_path, remember_in_profile, after=["--profile", "work"])


def test_update_and_recall_what_holds(tmp_path: Path) -> None:
    async def scenario(client: Client) -> None:
        old = data(
            await client.call_tool(
                "remember", {"content": "Priya works at Initech", "event_time": "2022-02-01"}
            )
        )
        new = data(
            await client.call_tool(
                "update",
                {"id": old["id"], "content": "Priya works at Globex", "event_time": "2024-05-01"},
            )
        )
        assert new["created"] is True and new["valid_from"] == "2024-05-01T00:00:00Z"
        replaced = data(await client.call_tool("get", {"id": old["id"]}))
        assert replaced["superseded_by"] == new["id"]

        now = data(await client.call_tool("recall", {"query": "Where does Priya work?"}))
        assert [r["id"] for r in now["results"]] == [new["id"]]
        both = data(
            await client.call_tool(
                "recall", {"query": "Where does Priya work?", "include_superseded": True}
            )
        )
        assert {r["id"] for r in both["results"]} == {old["id"], new["id"]}
        then = data(
            await client.call_tool(
                "recall", {"query": "Where does Priya work?", "as_of": "2023-01-01"}
            )
        )
        assert [r["id"] for r in then["results"]] == [old["id"]]

        third = data(
            await client.call_tool(
                "remember",
                {"content": "Priya works at Hooli", "supersedes": [new["id"]]},
            )
        )
        assert (
            data(await client.call_tool("get", {"id": new["id"]}))["superseded_by"] == (third["id"])
        )
        unknown = await client.call_tool("update", {"id": "0123456789abcdef", "content": "x"})
        assert "no memory with id" in error_text(unknown)
        cycle = await client.call_tool("update", {"id": old["id"], "content": "again"})
        assert "already superseded" in error_text(cycle)
        assert data(await client.call_tool("health", {}))["memories"] == 3
        undone = data(
            await client.call_tool("unlink", {"older_id": new["id"], "newer_id": third["id"]})
        )
        assert undone == {"unlinked": {"older": new["id"], "newer": third["id"]}}
        assert data(await client.call_tool("get", {"id": new["id"]}))["superseded_by"] is None
        again = await client.call_tool("unlink", {"older_id": new["id"], "newer_id": third["id"]})
        assert "no link to undo" in error_text(again)

    run_session(tmp_path, scenario)


def test_feedback_names_the_recall_it_is_about(tmp_path: Path) -> None:
    async def scenario(client: Client) -> None:
        made = data(
            await client.call_tool("remember", {"content": "The boiler is serviced in May"})
        )
        found = data(await client.call_tool("recall", {"query": "When is the boiler serviced?"}))
        assert len(found["query_id"]) == 32
        told = data(
            await client.call_tool(
                "feedback",
                {"memory_id": made["id"], "useful": True, "query_id": found["query_id"]},
            )
        )
        assert told["useful"] is True and told["query_id"] == found["query_id"]
        assert told["ranking"]["rerank"] is True  # on by default
        unknown = {"memory_id": made["id"], "useful": False, "query_id": "a" * 32}
        assert "no recall with query id" in error_text(await client.call_tool("feedback", unknown))
        bad = {"memory_id": made["id"], "useful": True, "query_id": "nope"}
        assert "query id must be" in error_text(await client.call_tool("feedback", bad))
        missing = {"memory_id": "0" * 16, "useful": True}
        assert "not found" in error_text(await client.call_tool("feedback", missing))

    run_session(tmp_path, scenario)


def test_a_message_the_server_cannot_read_gets_an_error_reply(tmp_path: Path) -> None:
    """Issue #32: a request nested deeper than the SDK's parser allows, a line that is not
    JSON and JSON that is not JSON-RPC each get a JSON-RPC error (with the request's id when
    it can be read), and the server goes on answering. Spoken over raw pipes: a real
    client cannot send such lines."""
    command = [sys.executable, "-m", "slm", "--db", str(tmp_path / "mcp.db"), "mcp"]
    env = {**os.environ, "SLM_EMBEDDER": "fake", "SLM_HOME": str(tmp_path)}
    deep = "[" * 300 + "]" * 300
    lines = [
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        ),
        '{"jsonrpc": "2.0", "method": "notifications/initialized"}',
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall", '
        f'"arguments": {{"query": {deep}}}}}}}',
        "this is not JSON",
        '{"jsonrpc": "2.0", "id": 4}',
        '{"jsonrpc": "2.0", "id": 5, "method": "tools/list"}',
    ]
    server = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write("\n".join(lines) + "\n")
    server.stdin.flush()
    replies: list[dict[str, Any]] = []
    try:
        while not any(reply.get("id") == 5 for reply in replies):
            ready, _, _ = select.select([server.stdout], [], [], 60)
            assert ready, f"no reply within 60 s; got {replies}"
            line = server.stdout.readline()
            assert line, f"the server stopped; got {replies}"
            replies.append(json.loads(line))
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    errors = {reply.get("id"): reply["error"] for reply in replies if "error" in reply}
    assert errors[2]["code"] == -32700 and "recursion limit" in errors[2]["message"]
    assert errors[None]["code"] == -32700 and "not valid JSON" in errors[None]["message"]
    assert errors[4]["code"] == -32600
    assert all("\n" not in error["message"] for error in errors.values())
    listed = next(reply for reply in replies if reply.get("id") == 5)
    assert {tool["name"] for tool in listed["result"]["tools"]} == TOOLS


def test_a_conversation_is_stored_through_mcp(tmp_path: Path) -> None:
    async def scenario(client: Client) -> None:
        messages = [
            {"role": "user", "content": "Standup moved to 9:30."},
            {"role": "assistant", "content": "Got it."},
        ]
        done = data(await client.call_tool("remember_conversation", {"messages": messages}))
        assert [m["content"] for m in done["memories"]] == [
            "user: Standup moved to 9:30.",
            "assistant: Got it.",
        ]
        assert done["system_skipped"] == 0
        refused = await client.call_tool("remember_conversation", {"messages": [{"role": "user"}]})
        assert "messages[0].content" in error_text(refused)
        refused = await client.call_tool("remember_conversation", {"messages": [{"role": "x"}]})
        assert "invalid input: messages[0].role: role must be one of" in error_text(refused)
        named = [{"role": "user", "name": "Ma\u202eya", "content": "hi"}]
        refused = await client.call_tool("remember_conversation", {"messages": named})
        assert "invalid input: messages[0].name: name must be printable" in error_text(refused)
        system = [{"role": "system", "content": "You are a helpful assistant."}, *messages]
        done = data(await client.call_tool("remember_conversation", {"messages": system}))
        assert done["system_skipped"] == 1 and len(done["memories"]) == 2
        kept = {"messages": system, "system": "keep"}
        done = data(await client.call_tool("remember_conversation", kept))
        assert done["system_skipped"] == 0 and done["memories"][0]["source"] == "system"

    run_session(tmp_path, scenario)


def test_recall_through_mcp_filters_on_metadata(tmp_path: Path) -> None:
    async def scenario(client: Client) -> None:
        for i in range(6):
            await client.call_tool(
                "remember",
                {"content": f"note {i} about the release plan", "metadata": {"team": f"t{i % 2}"}},
            )
        found = data(
            await client.call_tool(
                "recall", {"query": "release plan", "k": 6, "metadata": {"team": "t1"}}
            )
        )
        assert len(found["results"]) == 3
        assert {r["metadata"]["team"] for r in found["results"]} == {"t1"}

    run_session(tmp_path, scenario)


def test_recall_through_mcp_leaves_out_what_is_below_a_minimum_relevance(tmp_path: Path) -> None:
    async def scenario(client: Client) -> None:
        for content in ("The boiler is serviced every October", "The boiler pressure is 1.5 bar"):
            await client.call_tool("remember", {"content": content})
        ask = {"query": "boiler service"}
        every = data(await client.call_tool("recall", ask))
        top = max(r["relevance_score"] for r in every["results"])
        none = data(await client.call_tool("recall", {**ask, "min_relevance": (top + 1) / 2}))
        assert none["results"] == [] and none["abstained"] is True
        assert none["abstention_reason"] == "evidence_floor"
        low = data(await client.call_tool("recall", {**ask, "min_relevance": 0}))
        assert [r["id"] for r in low["results"]] == [r["id"] for r in every["results"]]
        refused = error_text(await client.call_tool("recall", {**ask, "min_relevance": 1.5}))
        assert "invalid input: min_relevance must be in 0..1, got 1.5" in refused

    run_session(tmp_path, scenario)
