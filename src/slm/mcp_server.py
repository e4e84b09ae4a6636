"""``slm mcp``: the memory of one profile as MCP tools, served over stdio.

A thin adapter: each tool calls one :class:`slm.Memory` method and returns its ``to_dict()``
(for ``recall`` and ``trace``, the score-contract-v2 object ``slm recall --json`` prints).
Library errors become MCP tool errors carrying the library's message, so a bad call is
something the agent can read and correct, never a stopped server.

The tool descriptions are the only guidance an agent gets about *when* to use memory, so
they say what is worth storing and how to phrase a query, not how slm works inside.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from slm.engine import Memory
from slm.errors import ConfigError, InvalidInput, NotFound, SlmError, install_hint

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import Field
except ImportError as exc:  # the extra is optional; say which one instead of a traceback
    raise ConfigError(f"slm mcp needs the MCP extra: {install_hint('mcp')}") from exc

INSTRUCTIONS = """\
Long-term memory that persists across sessions. Call `recall` before answering anything that
may depend on earlier conversations (the user's preferences, people, projects, decisions,
dates). Call `remember` when you learn a durable fact worth having next time. Scores follow
score contract v2: `relevance_score` says how strongly a memory answers the query (0..1, not a
probability); when `abstained` is true nothing stored is relevant, so say you do not know."""

REMEMBER = """\
Store one durable fact so a later session can recall it.

Worth remembering: stable facts about the user, people and projects (names, preferences,
allergies, constraints, deadlines), decisions and why they were made, outcomes of work,
commitments and recurring schedules. Not worth it: small talk, anything already in the code or
the docs, transient state, and never secrets (passwords, tokens, keys).

Write one self-contained statement in plain words, with names instead of pronouns and dates
instead of "yesterday": "Priya is allergic to cats", not "she's allergic". Pass event_time
(ISO 8601) when the fact happened at a known time other than now. Storing identical text again
returns the existing memory. Returns the stored memory, with its id."""

RECALL = """\
Find the stored memories most relevant to a question, ranked.

Use it before answering anything that may depend on earlier sessions. Phrase the query as the
question you need answered, or a short description with the key names and terms: "Which pets
should we avoid around Priya?", "deploy schedule for the billing service". Ask separate
questions for separate topics rather than one long query.

Returns the score contract v2 object: `results` in `rank_position` order, each with `content`,
`id`, `event_time`, `source`, `relevance_score` (0..1: how strongly it answers this query; not
a probability), `memory_confidence` (stored with the memory) and `trust_score` (trust in its
source). If `abstained` is true, nothing stored is relevant: do not guess from the results."""

FORGET = """\
Delete memories by id (ids come from recall, get or list_recent), from every index.

Use it when the user asks you to forget something, or a memory is wrong or superseded (store
the corrected fact with remember). Returns the ids forgotten and the ids not found."""

GET = "Fetch one memory by its id (16 lowercase hex characters)."

LIST_RECENT = """\
The most recently stored memories, newest first: to review what is known, or to find the id
of a memory to forget. Prefer recall to look something up."""

TRACE = """\
Recall with a diagnostic trace: which retrieval channels ran, what each returned and how long
it took. Use it to understand why a memory was or was not recalled; use recall to answer."""

HEALTH = "Store, embedding model and retrieval-channel health, and this profile's memory count."

Query = Annotated[str, Field(description="The question or topic to look up, in plain words.")]
K = Annotated[int, Field(description="How many memories to return, 1..1000.")]


def build_server(memory: Memory) -> MCPServer:
    """The MCP server whose tools act on ``memory``."""
    # WARNING: the SDK logs every rejected call at INFO, which is the agent's business, not ours.
    server = MCPServer("slm", instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(description=REMEMBER)
    def remember(
        content: Annotated[str, Field(description="The fact, one self-contained statement.")],
        event_time: Annotated[
            str | None, Field(description="When it happened, ISO 8601 (default: now).")
        ] = None,
        source: Annotated[
            str | None, Field(description="Who said it or where it came from (user or agent id).")
        ] = None,
        confidence: Annotated[
            float, Field(description="How sure you are it is true, 0..1 (default 1).")
        ] = 1.0,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Extra JSON fields to keep with it.")
        ] = None,
        tags: Annotated[
            list[str] | None, Field(description="Short labels, e.g. ['health'].")
        ] = None,
    ) -> dict[str, Any]:
        return _call(
            lambda: memory.remember(
                content,
                event_time=event_time,
                source=source,
                confidence=confidence,
                metadata=metadata,
                tags=tags or (),
            ).to_dict()
        )

    @server.tool(description=RECALL)
    def recall(
        query: Query,
        k: K = 10,
        trace: Annotated[bool, Field(description="Also return the diagnostic trace.")] = False,
    ) -> dict[str, Any]:
        return _call(lambda: memory.recall(query, k=k, trace=trace).to_dict())

    @server.tool(description=FORGET)
    def forget(
        ids: Annotated[list[str], Field(description="Ids of the memories to delete.")],
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            removed = memory.forget(ids)
            missing = [i for i in dict.fromkeys(ids) if i not in removed]
            return {"forgotten": removed, "not_found": missing}

        return _call(run)

    @server.tool(description=GET)
    def get(id: Annotated[str, Field(description="The memory's id.")]) -> dict[str, Any]:
        return _call(lambda: memory.get(id).to_dict())

    @server.tool(description=LIST_RECENT)
    def list_recent(
        limit: Annotated[int, Field(description="How many, 1..10000 (default 20).")] = 20,
    ) -> dict[str, Any]:
        return _call(lambda: {"memories": [r.to_dict() for r in memory.list(limit)]})

    @server.tool(description=TRACE)
    def trace(query: Query, k: K = 10) -> dict[str, Any]:
        return _call(lambda: memory.recall(query, k=k, trace=True).to_dict())

    @server.tool(description=HEALTH)
    def health() -> dict[str, Any]:
        return _call(memory.health)

    return server


def _call(action: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one library call; its deliberate errors become tool errors the agent can read."""
    try:
        return action()
    except InvalidInput as exc:
        raise ToolError(f"invalid input: {exc}") from exc
    except NotFound as exc:
        raise ToolError(f"not found: {exc}") from exc
    except SlmError as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from exc


def run_stdio(memory: Memory) -> None:
    """Serve ``memory`` over stdin/stdout until the client disconnects."""
    build_server(memory).run("stdio")
