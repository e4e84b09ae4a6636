"""Conversations in as they are: a list of chat messages, in the shape the OpenAI and
Anthropic chat APIs use, becomes one memory per message.

A message is ``{"role", "content", "name"?, "time"?}``: ``content`` is a string or a list of
parts (``{"type": "text", "text": ...}``; other parts such as images or tool calls are left
out); ``time`` (also ``timestamp`` or ``created_at``) is ISO 8601 or Unix seconds. A
conversation is a list of messages or ``{"messages": [...], "session"?, "time"?}``.

Each message is stored the way a turn stored by itself is (and as the benchmarks store
theirs): the text labelled with its speaker (``"Maya: I moved to Lisbon"``), the speaker as
the source, its time as the event time (else the conversation's, else now), and its role,
session and position in the metadata. So the conversational reading applies unchanged: the
user's and the assistant's words, standing instructions, preferences, facts that change.
The messages of one conversation are one thread (each message's turn before is the message
before it, whoever said it): under its ``session`` when one is given, else under an id made
from its messages (``metadata["conversation"]``, the same each time the same conversation is
stored), so that what answers a question is read with the question it answers.
A message without text (only an image or a tool call) is skipped.

A system message (role ``system`` or ``developer``) is the application's instructions to the
model, not something said in the conversation: by default it is left out and counted; with
``system="keep"`` it is stored under its role as source, which the standing reading takes as
instructions sentence by sentence (:mod:`slm.ingest.standing`).

Roles are those the OpenAI and Anthropic message formats define (:data:`ROLES`); a
``name`` is printable text of at most :data:`MAX_NAME_CHARS` characters, since it becomes
the speaker label of the stored text and its source, unless it is another role's word: a
``tool`` message named "user" or a ``user`` message named "assistant" is stored under its
role (the name kept in the metadata), since the role, not the name, says whose words a
message is. A malformed conversation is refused
whole, naming the message and the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from slm import validate
from slm.errors import InvalidInput
from slm.ingest.roles import SYSTEM_ROLES, role_of
from slm.inputs.memories import MemoryInput, check_item

#: The most messages one conversation may hold.
MAX_MESSAGES = 100_000
#: The roles of the OpenAI and Anthropic chat formats, the only ones a message may have.
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
#: What to do with system messages: leave them out (counted), or keep them as instructions.
SYSTEM_CHOICES = ("skip", "keep")
#: The longest speaker name (OpenAI's own limit for ``name``).
MAX_NAME_CHARS = 64
_MESSAGE_FIELDS = frozenset({"role", "content", "name", "time", "timestamp", "created_at"})
_CONVERSATION_FIELDS = frozenset({"messages", "session", "time"})
#: The metadata keys a conversation sets for each of its messages.
MESSAGE_KEYS = frozenset({"role", "message", "session", "name", "conversation"})


def is_conversation(value: object) -> bool:
    """Whether ``value`` looks like a conversation (rather than one memory)."""
    if isinstance(value, Mapping):
        return "messages" in value
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, Mapping) and "role" in m for m in value)
    )


@dataclass(frozen=True, slots=True)
class Transcript:
    """What a conversation becomes: its memories, in order, and how many system messages
    with text were left out."""

    items: list[MemoryInput]
    system_skipped: int = 0


def memories(
    conversation: object,
    *,
    session: str | None = None,
    system: str = "skip",
    metadata: Mapping[str, Any] | str | None = None,
) -> list[MemoryInput]:
    """The memories of ``conversation`` (:func:`read`)."""
    return read(conversation, session=session, system=system, metadata=metadata).items


def read(
    conversation: object,
    *,
    session: str | None = None,
    system: str = "skip",
    metadata: Mapping[str, Any] | str | None = None,
) -> Transcript:
    """The memories of ``conversation`` (a list of messages or ``{"messages": ...}``), in
    order, with ``system`` messages skipped or kept and ``metadata`` (the owner's keys among
    it) kept with each; :class:`InvalidInput` naming the message and field of the first
    problem."""
    common = validate.metadata(metadata)
    taken = sorted(set(common) & MESSAGE_KEYS)
    if taken:
        raise InvalidInput(
            f"metadata {taken[0]!r} is set by the conversation for each message "
            f"({', '.join(sorted(MESSAGE_KEYS))}); use another key",
            field="metadata",
        )
    if system not in SYSTEM_CHOICES:
        raise InvalidInput(
            f"system must be {' or '.join(SYSTEM_CHOICES)}, not {_show(system)}", field="system"
        )
    start: datetime | None = None
    if isinstance(conversation, Mapping):
        unknown = sorted(set(map(str, conversation)) - _CONVERSATION_FIELDS)
        if unknown:
            raise InvalidInput(f"unknown conversation field(s) {', '.join(unknown)}",
                               field=unknown[0])  # fmt: skip
        if session is None:
            session = conversation.get("session")
        start = validate.timestamp(conversation.get("time"), "time")
        conversation = conversation.get("messages")
    if session is not None:
        session = _text(session, "session")
    if not isinstance(conversation, list):
        raise InvalidInput("messages must be a list of messages", field="messages")
    if not conversation:
        raise InvalidInput("messages is empty: a conversation needs at least one", field="messages")
    if len(conversation) > MAX_MESSAGES:
        raise InvalidInput(f"more than {MAX_MESSAGES} messages in one conversation",
                           field="messages")  # fmt: skip
    out, skipped = [], 0
    for index, message in enumerate(conversation):
        try:
            role, item = _memory(message, index, session, start, common)
            if item is not None and role in SYSTEM_ROLES and system == "skip":
                skipped, item = skipped + 1, None
            if item is not None:
                check_item(index, item, datetime.now(UTC), numbered=False)  # the limits
        except InvalidInput as exc:
            field = f"messages[{index}]" + (f".{exc.field}" if exc.field else "")
            raise InvalidInput(f"{field}: {exc}", field=field, index=index) from None
        if item is not None:
            out.append(item)
    if not out and not skipped:
        raise InvalidInput("no message of the conversation has text", field="messages")
    if session is None and out:
        thread = thread_id(out)
        out = [replace(m, metadata={**_fields(m), "conversation": thread}) for m in out]
    return Transcript(out, skipped)


def _fields(item: MemoryInput) -> dict[str, Any]:
    return dict(item.metadata) if isinstance(item.metadata, Mapping) else {}


def thread_id(items: Sequence[MemoryInput]) -> str:
    """An id for a conversation given without a session, made from its messages (speaker,
    text, time), so that storing the same conversation again names the same thread."""
    said = [(m.source, m.content, str(m.event_time)) for m in items]
    digest = hashlib.sha256(json.dumps(said, ensure_ascii=False).encode("utf-8")).hexdigest()
    return f"chat-{digest[:16]}"


def _memory(
    message: object,
    index: int,
    session: str | None,
    start: datetime | None,
    common: Mapping[str, Any],
) -> tuple[str, MemoryInput | None]:
    """The message's role and its memory (None: it has no text)."""
    if not isinstance(message, Mapping):
        raise InvalidInput("a message is an object with role and content")
    unknown = sorted(set(map(str, message)) - _MESSAGE_FIELDS)
    if unknown:
        raise InvalidInput(f"unknown field(s) {', '.join(unknown)}", field=unknown[0])
    if "role" not in message:
        raise InvalidInput("role is missing", field="role")
    role = message["role"]
    if isinstance(role, str):
        validate.encodable(role, "role")
    if role not in ROLES:
        raise InvalidInput(f"role must be one of {', '.join(ROLES)}, not {_show(role)}",
                           field="role")  # fmt: skip
    name = _name(message["name"]) if message.get("name") is not None else None
    if name is not None and name.casefold() in SYSTEM_ROLES and role not in SYSTEM_ROLES:
        raise InvalidInput(f"name {name!r} is reserved for {name.casefold()} messages",
                           field="name")  # fmt: skip
    text = _content(message.get("content"))
    when = _moment(message) or start
    if not text.strip():
        return role, None
    metadata: dict[str, Any] = {**common, "role": role, "message": index}
    if session is not None:
        metadata["session"] = session
    # A system message speaks as its role, so that its source says what it is; so does a
    # message whose name is another role's word (a tool named "user", a user message
    # named "assistant"): the role says whose words a message is, never the name.
    speaker = role if role in SYSTEM_ROLES or _passes_for_another(name, role) else name or role
    if name is not None and speaker != name:
        metadata["name"] = name
    return role, MemoryInput(
        f"{speaker}: {text.strip()}", event_time=when, source=speaker, metadata=metadata
    )


def _passes_for_another(name: str | None, role: str) -> bool:
    """Whether ``name`` read as a speaker would say the words are another role's (a user's
    or an assistant's) than ``role`` says."""
    return name is not None and role_of("", name) not in (None, role_of("", role))


def _name(value: object) -> str:
    """A speaker's name: printable (no control, format or bidirectional override
    characters, no lone surrogates), at most :data:`MAX_NAME_CHARS` characters."""
    name = _text(value, "name")
    if len(name) > MAX_NAME_CHARS:
        raise InvalidInput(f"name is {len(name)} characters; the limit is {MAX_NAME_CHARS}",
                           field="name")  # fmt: skip
    if not name.isprintable():
        raise InvalidInput(f"name must be printable text, not {_show(name)}", field="name")
    return name


def _show(value: object) -> str:
    """``value`` for a message: escaped by repr, so printable, and short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _content(value: object) -> str:
    """The text of a message's content: a string, or the text parts of a list of parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for part in value:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping) and part.get("type") == "text":
                texts.append(_text(part.get("text"), "content"))
            elif not isinstance(part, Mapping):
                raise InvalidInput("a content part is a string or an object", field="content")
        return "\n".join(texts)
    raise InvalidInput("content must be a string or a list of parts", field="content")


def _moment(message: Mapping[str, Any]) -> datetime | None:
    for key in ("time", "timestamp", "created_at"):
        value = message.get(key)
        if value is None:
            continue
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                return datetime.fromtimestamp(float(value), UTC)
            except (OverflowError, OSError, ValueError):
                raise InvalidInput(f"{key} is not a time", field=key) from None
        return validate.timestamp(value, key)
    return None


def _text(value: object, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{field} must be a non-empty string", field=field)
    return validate.encodable(value, field).strip()


def batches(items: Sequence[MemoryInput]) -> list[Sequence[MemoryInput]]:
    """``items`` in batches of at most ``validate.MAX_BATCH`` (a batch is one write)."""
    step = validate.MAX_BATCH
    return [items[start : start + step] for start in range(0, len(items), step)]
