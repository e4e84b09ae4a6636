"""``slm mcp``: the memory of one profile as MCP tools, served over stdio.

A thin adapter: each tool calls one :class:`slm.Memory` method and returns its ``to_dict()``
(for ``recall`` and ``trace``, the score-contract-v2 object ``slm recall --json`` prints).
Library errors become MCP tool errors carrying the library's message, so a bad call is
something the agent can read and correct, never a stopped server.

The tool descriptions are the only guidance an agent gets about *when* to use memory, so
they say what is worth storing and how to phrase a query, not how slm works inside.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Annotated, Any, cast

from slm import __version__, validate
from slm.engine import Memory
from slm.errors import ConfigError, NotFound, SlmError, install_hint, outcome
from slm.inputs.conversations import MAX_MESSAGES, SYSTEM_CHOICES
from slm.inputs.scope import Owner
from slm.models import RecallRequest
from slm.profiles import profiles as listed
from slm.profiles import require

try:
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.tools import Tool
    from mcp.server.stdio import stdio_server
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage
    from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
    from pydantic import BaseModel, ConfigDict, Field, ValidationError
except ImportError as exc:  # the extra is optional; say which one instead of a traceback
    raise ConfigError(f"slm mcp needs the MCP extra: {install_hint('mcp')}") from exc

INSTRUCTIONS = """\
Long-term memory that persists across sessions. Call `recall` before answering anything that
may depend on earlier conversations (the user's preferences and standing instructions, people,
projects, decisions, dates). Call `remember` when you learn a durable fact worth having next
time. `relevance_score` says how strongly a memory answers the query (0..1, not a
probability); when `abstained` is true nothing stored is relevant enough: say you do not
know. `answer_confidence`, when not null, is a calibrated probability that the results hold
the answer."""

REMEMBER = """\
Store one durable fact, preference or standing instruction. Worth remembering: facts about
the user, people and projects, rules the user sets ("always ..."), decisions, deadlines; never
secrets. One self-contained statement with names and dates ("Priya is allergic to cats");
`user_id` says whose it is. Identical text is stored once (`created`). A fact that changed:
use `update`, or name the old memory in `supersedes`; `updates` lists memories this one
probably replaces."""

CONVERSATION = """Store a whole conversation as it is: a list of chat messages (role, content,
optional name and time, as chat APIs write them), one memory per message with its speaker,
role and time. Pass `user_id` (and `metadata`) so the conversation is that user's. System
messages are left out (counted in system_skipped) unless `system` is "keep". Use it to keep
a transcript; use remember for a single durable fact."""

UPDATE = """Replace a stored memory that is no longer true ("Priya moved to Porto" replacing "Priya
lives in Lisbon"): the new text is stored as a new memory, the old one stays readable but
recall stops returning it. Pass the id of the old memory (from recall, get or list_recent)."""

UNLINK = """Undo a link slm made: the newer memory does not replace the older one (the two say
different things; `possibly_superseded_by` was wrong). The older memory holds again."""

RECALL = """\
Find the stored memories most relevant to a question, ranked. Call it before answering
anything that may depend on earlier sessions; phrase the query as the question you need
answered, one topic per call. `user_id` answers from that user's memories only; filters
narrow to a source, tags or time range. It answers with what is true now;
`possibly_superseded_by` names newer memories that may replace a result. If `abstained` is
true, nothing stored is relevant enough: do not guess."""

FORGET = """\
Delete memories by id (from recall, get or list_recent) when the user asks you to forget
something or a memory is wrong; store the corrected fact with remember. To forget everything
about a user ("forget me"), pass `user_id` instead of ids; `dry_run` first says how many
memories that is without deleting them."""

HISTORY = """\
The history of one memory: what it replaced and what replaced it, when, and whether each
link was stated (update, supersedes) or probable (found when it was stored); `current` is
the id of the version that holds now."""

FEEDBACK = """\
Say whether a recalled memory helped: `useful` true or false, with the `query_id` of the
recall response it came from. Feedback teaches this memory's ranking over time (when the
reranker and learning are on) and adjusts its source's trust_score; give it when a memory
clearly answered the question or clearly did not."""

GET = "Fetch one memory by its id (16 lowercase hex characters)."

LIST_RECENT = """\
The most recently stored memories, newest first: to review what is known or find an id to
forget. To look something up, use recall."""

TRACE = """\
Recall with a diagnostic trace (which channels ran, what each found). Use it to understand
why a memory was or was not recalled; use recall to answer."""

HEALTH = "Store, embedding model and retrieval-channel health, and this profile's memory count."

PROFILES = """The profiles of this memory store, each with how many memories it holds and when it
was last written. This server reads and writes one of them (see health); a profile that holds
nothing yet is created by remembering something in it."""

Query = Annotated[
    str, Field(description="The question or topic to look up, in plain words.", min_length=1)
]
K = Annotated[
    int,
    Field(
        description=f"How many memories to return, 1..{validate.MAX_K}.", ge=1, le=validate.MAX_K
    ),
]
Source = Annotated[
    str | None,
    Field(description="Only memories from this source.", max_length=validate.MAX_SOURCE_CHARS),
]
Tags = Annotated[
    list[str] | None,
    Field(description="Only memories carrying all of these tags.", max_length=validate.MAX_TAGS),
]
After = Annotated[
    str | None, Field(description="Only memories that happened at or after this ISO 8601 time.")
]
Before = Annotated[
    str | None, Field(description="Only memories that happened before this ISO 8601 time.")
]
UserId = Annotated[
    str | int | None,
    Field(description="user_id: whose memory this is (or whose memories to read): the user's id."),
]
AgentId = Annotated[str | int | None, Field(description="agent_id: the agent it belongs to.")]
RunId = Annotated[str | int | None, Field(description="run_id: the run or session it belongs to.")]
Scope = Annotated[
    dict[str, Any] | None,
    Field(description='Values of the store\'s other scope keys, e.g. {"tenant": "acme"}.'),
]


def _owner(
    user_id: str | int | None,
    agent_id: str | int | None,
    run_id: str | int | None,
    scope: dict[str, Any] | None,
) -> Owner:
    """A tool's owner arguments as ``Memory`` takes them (``**owner``)."""
    return Owner(user_id=user_id, agent_id=agent_id, run_id=run_id, scope=scope)


def build_server(memory: Memory) -> MCPServer:
    """The MCP server whose tools act on ``memory``."""

    def remember(
        content: Annotated[str, Field(description="The fact, one self-contained statement.")],
        event_time: Annotated[
            str | None, Field(description="When it happened, ISO 8601 (default: now).")
        ] = None,
        source: Annotated[
            str | None,
            Field(
                description="Who said it or where it came from (user or agent id).",
                max_length=validate.MAX_SOURCE_CHARS,
            ),
        ] = None,
        confidence: Annotated[
            float, Field(description="How sure you are it is true, 0..1 (default 1).", ge=0, le=1)
        ] = 1.0,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Extra JSON fields to keep with it.")
        ] = None,
        tags: Annotated[
            list[str] | None,
            Field(description="Short labels, e.g. ['health'].", max_length=validate.MAX_TAGS),
        ] = None,
        supersedes: Annotated[
            list[str] | None,
            Field(
                description="Ids of stored memories this one replaces (no longer true).",
                max_length=validate.MAX_SUPERSEDES,
            ),
        ] = None,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        scope: Scope = None,
    ) -> dict[str, Any]:
        return _call(
            lambda: memory.remember(
                content,
                event_time=event_time,
                source=source,
                confidence=confidence,
                metadata=metadata,
                tags=tags or (),
                supersedes=supersedes or (),
                **_owner(user_id, agent_id, run_id, scope),
            ).to_dict()
        )

    def remember_conversation(
        messages: Annotated[
            list[dict[str, Any]],
            Field(description="The messages, oldest first.", min_length=1, max_length=MAX_MESSAGES),
        ],
        session: Annotated[str | None, Field(description="A name for this conversation.")] = None,
        system: Annotated[
            str,
            Field(
                description="System messages: skip (the default) or keep as instructions.",
                json_schema_extra={"enum": list(SYSTEM_CHOICES)},
            ),
        ] = "skip",
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Extra JSON fields to keep with each message.")
        ] = None,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        scope: Scope = None,
    ) -> dict[str, Any]:
        return _call(
            lambda: memory.remember_conversation(
                messages,
                session=session,
                system=system,
                metadata=metadata,
                **_owner(user_id, agent_id, run_id, scope),
            ).to_dict()
        )

    def update(
        id: Annotated[str, Field(description="The id of the memory that is no longer true.")],
        content: Annotated[str, Field(description="What is true now, one statement.")],
        event_time: Annotated[
            str | None, Field(description="When it changed, ISO 8601 (default: now).")
        ] = None,
    ) -> dict[str, Any]:
        return _call(lambda: memory.update(id, content, event_time=event_time).to_dict())

    def unlink(
        older_id: Annotated[str, Field(description="The memory shown as replaced.")],
        newer_id: Annotated[str, Field(description="The memory shown as replacing it.")],
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            memory.unlink(older_id, newer_id)
            return {"unlinked": {"older": older_id, "newer": newer_id}}

        return _call(run)

    def recall(
        query: Query,
        k: K = 10,
        source: Source = None,
        tags: Tags = None,
        after: After = None,
        before: Before = None,
        trace: Annotated[bool, Field(description="Also return the diagnostic trace.")] = False,
        include_superseded: Annotated[
            bool, Field(description="Also return memories that were replaced (flagged).")
        ] = False,
        as_of: Annotated[
            str | None,
            Field(description="Answer with what held at this ISO 8601 time (default: now)."),
        ] = None,
        metadata: Annotated[
            dict[str, Any] | None,
            Field(description='Only memories whose metadata matches: {"user_id": "u7"}.'),
        ] = None,
        min_relevance: Annotated[
            float | None,
            Field(description="Leave out results whose relevance_score is below this, 0..1."),
        ] = None,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        scope: Scope = None,
    ) -> dict[str, Any]:
        return _read(
            lambda: memory.recall_request(
                RecallRequest(
                    query,
                    k=k,
                    trace=trace,
                    source=source,
                    tags=tags or (),
                    after=after,
                    before=before,
                    include_superseded=include_superseded,
                    as_of=as_of,
                    metadata=metadata,
                    min_relevance=min_relevance,
                    **_owner(user_id, agent_id, run_id, scope),
                )
            ).to_dict()
        )

    def forget(
        ids: Annotated[
            list[str] | None,
            Field(
                description="Ids of the memories to delete (or give user_id instead).",
                min_length=1,
                max_length=validate.MAX_IDS_PER_CALL,
            ),
        ] = None,
        user_id: Annotated[
            str | int | None,
            Field(description="user_id: forget every memory of this user (not with ids)."),
        ] = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        scope: Scope = None,
        metadata: Annotated[
            dict[str, Any] | None,
            Field(description='Forget the memories whose metadata matches: {"project": "x"}.'),
        ] = None,
        dry_run: Annotated[
            bool, Field(description="Only count what would be deleted; delete nothing.")
        ] = False,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            gone = memory.forget(
                ids,
                metadata=metadata,
                **_owner(user_id, agent_id, run_id, scope),
                dry_run=dry_run,
                missing_ok=True,  # by ids: those it does not hold are named
            )
            if ids is not None:
                missing = [i for i in dict.fromkeys(ids) if i not in gone]
                return {"would_forget" if dry_run else "forgotten": gone, "not_found": missing}
            if dry_run:
                return {"dry_run": True, "count": len(gone), "ids": gone}
            return {"forgotten": gone, "count": len(gone)}

        return _call(run)

    def history(id: Annotated[str, Field(description="The memory's id.")]) -> dict[str, Any]:
        return _read(lambda: memory.history(id).to_dict())

    def feedback(
        memory_id: Annotated[str, Field(description="The memory's id.")],
        useful: Annotated[bool, Field(description="Did it help answer the question?")],
        query_id: Annotated[
            str | None, Field(description="The query_id of the recall it came from.")
        ] = None,
    ) -> dict[str, Any]:
        return _call(lambda: memory.feedback_report(memory_id, useful=useful, query_id=query_id))

    def get(id: Annotated[str, Field(description="The memory's id.")]) -> dict[str, Any]:
        return _read(lambda: memory.get(id).to_dict())

    def list_recent(
        limit: Annotated[
            int,
            Field(
                description=f"How many, 1..{validate.MAX_LIST_LIMIT} (default 20).",
                ge=1,
                le=validate.MAX_LIST_LIMIT,
            ),
        ] = 20,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        scope: Scope = None,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            held = memory.list(limit, **_owner(user_id, agent_id, run_id, scope))
            return {"memories": [r.to_dict() for r in held]}

        return _read(run)

    def trace(
        query: Query,
        k: K = 10,
        user_id: UserId = None,
        agent_id: AgentId = None,
        run_id: RunId = None,
        scope: Scope = None,
    ) -> dict[str, Any]:
        return _read(
            lambda: memory.recall(
                query,
                k=k,
                trace=True,
                **_owner(user_id, agent_id, run_id, scope),
            ).to_dict()
        )

    def health() -> dict[str, Any]:
        return _read(memory.health)

    def profiles() -> dict[str, Any]:
        return _call(lambda: {"profiles": [p.to_dict() for p in listed(memory)]})

    def _read(action: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``action``, whose empty answer on a profile holding nothing while others do says
        so instead (most likely a misconfigured name: the error names the others)."""

        def run() -> dict[str, Any]:
            try:
                answer = action()
            except NotFound:
                require(memory)
                raise
            if not any(answer.get(key) for key in ("results", "memories", "id")):
                require(memory)
            return answer

        return _call(run)

    tools: list[tuple[Callable[..., dict[str, Any]], str]] = [
        (remember, REMEMBER),
        (remember_conversation, CONVERSATION),
        (update, UPDATE),
        (unlink, UNLINK),
        (recall, RECALL),
        (forget, FORGET),
        (feedback, FEEDBACK),
        (get, GET),
        (history, HISTORY),
        (list_recent, LIST_RECENT),
        (trace, TRACE),
        (health, HEALTH),
        (profiles, PROFILES),
    ]
    # WARNING: the SDK logs every rejected call at INFO, which is the agent's business, not ours.
    return MCPServer(
        "slm",
        version=__version__,
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        tools=[_strict(Tool.from_function(fn, description=text)) for fn, text in tools],
        middleware=[_one_line_errors],
    )


async def _one_line_errors(ctx: Any, call_next: Any) -> Any:
    """Tool errors in one line: the SDK reports arguments that fail their schema as
    pydantic's multi-line dump with a web address; the agent gets ``field: message`` for
    each instead, the way the library's own errors read."""
    result = await call_next(ctx)
    if isinstance(result, dict) and result.get("isError") and result.get("content"):
        first = result["content"][0]
        text = first.get("text") if isinstance(first, dict) else None
        if isinstance(text, str) and "\n" in text:
            content = [{**first, "text": _one_line(text)}, *result["content"][1:]]
            result = {**result, "content": content}
    return result


def _one_line(text: str) -> str:
    """``Error executing tool t: 2 validation errors for tArguments\nk\n  Input should be
    ... [type=...]`` -> ``Error executing tool t: k: Input should be ...; ...``."""
    head, _, dump = text.partition(": ")
    found, field = [], None
    for line in dump.splitlines()[1:]:
        if not line.startswith(" "):
            field = line.strip()
        elif field is not None and "errors.pydantic.dev" not in line:
            found.append(f"{field}: {line.strip().split(' [type=')[0]}")
            field = None
    return f"{head}: {'; '.join(found)}" if found else " ".join(text.split())


def _strict(tool: Tool) -> Tool:
    """``tool`` refusing arguments it does not know (a misspelt filter would otherwise be
    dropped in silence), with its input schema saying so (``additionalProperties: false``)."""
    model = tool.fn_metadata.arg_model
    config = ConfigDict(**{**model.model_config, "extra": "forbid"})
    strict = cast(
        type[BaseModel],
        type(model.__name__, (model,), {"model_config": config, "__module__": __name__}),
    )
    metadata = tool.fn_metadata.model_copy(update={"arg_model": strict})
    schema = strict.model_json_schema(by_alias=True)
    return tool.model_copy(update={"fn_metadata": metadata, "parameters": schema})


def _call(action: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run one library call; its deliberate errors become tool errors the agent can read."""
    try:
        return action()
    except SlmError as exc:
        raise ToolError(f"{outcome(exc).tool_prefix}: {exc}") from exc


def run_stdio(memory: Memory) -> None:
    """Serve ``memory`` over stdin/stdout until the client disconnects."""
    anyio.run(_serve_stdio, build_server(memory))


async def _serve_stdio(server: MCPServer) -> None:
    """The SDK's stdio loop (what ``MCPServer.run("stdio")`` runs), except that a line it
    cannot read as a JSON-RPC message gets an error reply: the SDK drops such a line, and a
    client whose request it was would wait for an answer forever."""
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        send, receive = create_context_streams[SessionMessage | Exception](0)

        async def screen() -> None:
            async with send:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        await write_stream.send(SessionMessage(unreadable(item)))
                    else:
                        await send.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(screen)
            await lowlevel.run(receive, write_stream, lowlevel.create_initialization_options())


def unreadable(exc: Exception) -> JSONRPCError:
    """The JSON-RPC error for a line that is not a message: a parse error for bad JSON
    (nested too deeply included), an invalid request for JSON that is not JSON-RPC; it
    answers the line's id when one can be read, else null (as JSON-RPC 2.0 says)."""
    first: dict[str, Any] = {}
    if isinstance(exc, ValidationError):
        first = dict(exc.errors(include_input=True)[0])
    given = first.get("input")
    if first.get("type") == "json_invalid" or not isinstance(given, dict):
        code, what = PARSE_ERROR, "not valid JSON"
        request_id = _id_in(given) if isinstance(given, str) else None
    else:
        code, what = INVALID_REQUEST, "not a JSON-RPC 2.0 request"
        request_id = given.get("id")
    detail = str(first.get("msg") or exc).splitlines()[0]
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        request_id = None
    message = f"the message is {what}: {detail}"
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


def _id_in(line: str) -> object:
    """The top-level ``id`` of a JSON line the SDK refused (too deep for it, perhaps not
    for Python's parser); failing that, the first ``"id"`` written in it."""
    try:
        parsed = json.loads(line)
    except (ValueError, RecursionError):
        found = _ID.search(line)
        return json.loads(found.group(1)) if found else None
    return parsed.get("id") if isinstance(parsed, dict) else None
