"""The shapes of the REST API's request and response bodies (``slm.server.rest``): checked for
shape here, so the OpenAPI document says what is accepted; values are checked by the
library."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag
from pydantic.config import JsonDict

from slm import validate
from slm.inputs.conversations import MAX_MESSAGES, MAX_NAME_CHARS, ROLES, SYSTEM_CHOICES

# -- request and response shapes -----------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


_TIME: JsonDict = {"format": "date-time"}
#: A scope value: text or a number (``1`` and ``"1"`` are two users).
_OWNER = str | int | None


class _Owned(_Body):
    """Whose memory: merged into its metadata on write, into the filter on read
    (docs/scopes.md)."""

    user_id: _OWNER = Field(None, description="The user it belongs to (or whose to read).")
    agent_id: _OWNER = Field(None, description="The agent it belongs to.")
    run_id: _OWNER = Field(None, description="The run it belongs to.")
    scope: dict[str, Any] | None = Field(
        None, description='Values of the store\'s other scope keys: {"tenant": "acme"}.'
    )


#: The owner fields of a body, passed to the library by name.
OWNER_FIELDS = frozenset(_Owned.model_fields)


class MemoryIn(_Owned):
    content: str = Field(min_length=1, description="The memory text (at most 512 KiB of UTF-8).")
    event_time: str | None = Field(
        None, json_schema_extra=_TIME, description="When it happened, ISO 8601; default now."
    )
    source: str | None = Field(None, description="Who or what said it.")
    confidence: float = Field(1.0, ge=0, le=1, description="Stored confidence, 0..1.")
    metadata: dict[str, Any] | None = Field(None, description="A JSON object kept as is.")
    tags: list[str] = Field(default_factory=list, max_length=validate.MAX_TAGS)
    supersedes: list[str] = Field(
        default_factory=list,
        max_length=validate.MAX_SUPERSEDES,
        description="Ids of stored memories this one replaces.",
    )
    valid_from: str | None = Field(
        None, json_schema_extra=_TIME, description="When it starts to hold; default event_time."
    )


class UpdateIn(_Body):
    content: str = Field(min_length=1, description="What is true now (at most 512 KiB).")
    event_time: str | None = Field(
        None, json_schema_extra=_TIME, description="When it changed, ISO 8601; default now."
    )
    source: str | None = Field(None, description="Default: the old memory's.")
    confidence: float | None = Field(None, ge=0, le=1, description="Default: the old memory's.")
    metadata: dict[str, Any] | None = Field(None, description="Default: the old memory's.")
    tags: list[str] | None = Field(None, max_length=validate.MAX_TAGS)
    valid_from: str | None = Field(
        None, json_schema_extra=_TIME, description="When it starts to hold; default event_time."
    )


class FeedbackIn(_Body):
    memory_id: str = Field(pattern=r"^[0-9a-f]{16}$", description="The memory's id.")
    useful: bool = Field(description="Did it help answer the question?")
    query_id: str | None = Field(
        None, pattern=r"^[0-9a-f]{32}$", description="The recall response's query_id."
    )


class MemoryBatch(_Body):
    memories: list[MemoryIn] = Field(max_length=validate.MAX_BATCH)


def _one_or_batch(value: Any) -> str:
    return "batch" if isinstance(value, dict) and "memories" in value else "one"


RememberBody = Annotated[
    Annotated[MemoryIn, Tag("one")] | Annotated[MemoryBatch, Tag("batch")],
    Discriminator(_one_or_batch),
]


class MessageIn(_Body):
    """One chat message, as the OpenAI and Anthropic chat APIs write them."""

    role: str = Field(description=", ".join(ROLES), json_schema_extra={"enum": list(ROLES)})
    content: str | list[Any] = Field(description="The text, or a list of parts (text parts kept).")
    name: str | None = Field(
        default=None,
        description=f"The speaker's name, if not the role: printable text, at most "
        f"{MAX_NAME_CHARS} characters.",
    )
    time: str | float | None = Field(
        default=None, description="When it was said: ISO 8601 or Unix seconds."
    )


class ConversationIn(_Owned):
    """A conversation to store as it is: one memory per message, each with ``metadata``
    and the owner."""

    messages: list[MessageIn] = Field(min_length=1, max_length=MAX_MESSAGES)
    session: str | None = Field(default=None, description="A name for this conversation.")
    time: str | None = Field(default=None, description="When it started (ISO 8601).")
    metadata: dict[str, Any] | None = Field(
        None, description="A JSON object kept with every message."
    )
    system: str = Field(
        default="skip",
        description="System messages: skip (left out, counted in system_skipped) or keep "
        "(stored as standing instructions).",
        json_schema_extra={"enum": list(SYSTEM_CHOICES)},
    )


class RecallIn(_Owned):
    query: str = Field(min_length=1, description="The question, in plain words (at most 4 KiB).")
    k: int = Field(10, ge=1, le=validate.MAX_K, description="How many results.")
    trace: bool = Field(False, description="Include the per-channel trace.")
    source: str | None = None
    tags: list[str] = Field(default_factory=list, max_length=validate.MAX_TAGS)
    after: str | None = Field(None, json_schema_extra=_TIME, description="Event time >= this.")
    before: str | None = Field(None, json_schema_extra=_TIME, description="Event time < this.")
    channels: list[str] | None = Field(None, description="Run only these channels.")
    now: str | None = Field(None, description="Anchor for relative dates in the query.")
    include_superseded: bool = Field(False, description="Also return superseded memories.")
    as_of: str | None = Field(
        None, json_schema_extra=_TIME, description="Answer with what held at this time."
    )
    metadata: dict[str, Any] | None = Field(
        None,
        description="Only memories whose metadata key holds the value (or one of the list): "
        '{"user_id": "u7", "session": [3, 4]}.',
    )
    min_relevance: float | None = Field(
        None, description="Leave out results whose relevance_score is below this, 0..1."
    )


class MemoryOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: str
    content: str
    event_time: str
    recorded_at: str
    source: str | None
    metadata: dict[str, Any]
    tags: list[str]


class MemoryList(BaseModel):
    memories: list[MemoryOut]


class ResultOut(MemoryOut):
    relevance_score: float
    ranking_score: float
    memory_confidence: float
    trust_score: float
    rank_position: int


class RecallOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    score_contract_version: str
    calibration_status: str
    calibration_id: str | None
    answer_confidence: float | None
    abstained: bool
    abstention_reason: str | None
    query: str
    query_id: str | None
    results: list[ResultOut]


class Forgotten(BaseModel):
    forgotten: list[str]


class ErrorDetail(BaseModel):
    type: str
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail


_ERRORS: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorOut, "description": "Invalid input, unknown id, body too large."},
    "5XX": {"model": ErrorOut, "description": "The store or model failed."},
}


def ok(model: type[BaseModel] | None, status: int = 200) -> dict[int | str, dict[str, Any]]:
    body: dict[str, Any] = {"model": model} if model else {}
    if model is None:
        body["content"] = {"application/json": {"schema": {"type": "object"}}}
    return {status: body, **_ERRORS}
