"""Editing a JSON (or JSONC: comments, trailing commas) document as text, the way VS Code's
``jsonc-parser`` does: the document is scanned once into a tree of spans, and a change
rewrites only the span it concerns. Everything else (other keys and their order, comments,
indentation, line endings) keeps its bytes.

:func:`parse` gives the tree; :func:`set_member`, :func:`remove_member`,
:func:`append_element` and :func:`remove_element` return the edited text. A document that
does not scan raises :class:`Unreadable` with the line and column."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_LITERALS = {"true": True, "false": False, "null": None}


class Unreadable(ValueError):
    """The text is not JSON (with comments and trailing commas allowed)."""


@dataclass
class Node:
    """A value of the document: its span ``text[start:end]`` and, for an object or an
    array, its members (``key`` is None in an array)."""

    kind: str  # "object", "array" or "value"
    start: int
    end: int
    value: Any = None
    members: list[Member] = field(default_factory=list)

    def get(self, key: str) -> Node | None:
        for member in self.members:
            if member.key == key:
                return member.node
        return None

    def python(self) -> Any:
        """The value as :func:`json.loads` would give it (a repeated key: the last wins)."""
        if self.kind == "object":
            return {m.key: m.node.python() for m in self.members}
        if self.kind == "array":
            return [m.node.python() for m in self.members]
        return self.value


@dataclass
class Member:
    """One entry of an object or an array: from its key (or value) to the end of its value."""

    key: str | None
    start: int
    node: Node


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> Unreadable:
        line = self.text.count("\n", 0, self.pos) + 1
        column = self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1
        return Unreadable(f"{what} at line {line}, column {column}")

    def skip(self) -> None:
        """Past whitespace and comments."""
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in " \t\r\n\ufeff":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("a comment that is never closed")
                self.pos = end + 2
            else:
                return

    def value(self, depth: int = 0) -> Node:
        if depth > 200:
            raise self.fail("nesting too deep")
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("the document ends where a value was expected")
        char = self.text[self.pos]
        if char == "{":
            return self.container("object", "}", depth)
        if char == "[":
            return self.container("array", "]", depth)
        start = self.pos
        if char == '"':
            match = _STRING.match(self.text, self.pos)
            if match is None:
                raise self.fail("a string that is not valid JSON")
            self.pos = match.end()
            return Node("value", start, self.pos, json.loads(match.group()))
        match = _NUMBER.match(self.text, self.pos)
        if match is not None and match.end() > start:
            self.pos = match.end()
            return Node("value", start, self.pos, json.loads(match.group()))
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return Node("value", start, self.pos, literal)
        raise self.fail(f"an unexpected character {char!r}")

    def container(self, kind: str, close: str, depth: int) -> Node:
        node = Node(kind, self.pos, self.pos)
        self.pos += 1
        while True:
            self.skip()
            if self.text.startswith(close, self.pos):
                self.pos += 1
                node.end = self.pos
                return node
            if node.members:
                if not self.text.startswith(",", self.pos):
                    raise self.fail(f"',' or '{close}' expected")
                self.pos += 1
                self.skip()
                if self.text.startswith(close, self.pos):
                    continue  # a trailing comma
            start = self.pos
            key = None
            if kind == "object":
                keyed = self.value(depth + 1)
                if keyed.kind != "value" or not isinstance(keyed.value, str):
                    self.pos = keyed.start
                    raise self.fail("a key (a string) expected")
                key = keyed.value
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("':' expected")
                self.pos += 1
            node.members.append(Member(key, start, self.value(depth + 1)))


def parse(text: str) -> Node:
    """The tree of ``text``; an empty (or blank) document is an empty object."""
    scanner = _Scanner(text)
    scanner.skip()
    if scanner.pos >= len(text):
        return Node("object", -1, -1)
    root = scanner.value()
    scanner.skip()
    if scanner.pos < len(text):
        raise scanner.fail("text after the document's end")
    return root


def find(root: Node, path: tuple[str, ...]) -> Node | None:
    """The node at ``path``: keys of objects, and decimal indexes of arrays."""
    node: Node | None = root
    for key in path:
        if node is not None and node.kind == "array" and key.isdigit():
            index = int(key)
            node = node.members[index].node if index < len(node.members) else None
        elif node is None or node.kind != "object":
            return None
        else:
            node = node.get(key)
    return node


def set_member(text: str, path: tuple[str, ...], key: str, value: Any) -> str:
    """``text`` with the object at ``path`` holding ``key: value`` (missing objects on the
    way are created; an existing ``key`` has its value replaced where it stands)."""
    root = parse(text)
    if root.start < 0:
        nl = _newline(text)
        return _render({key: value} if not path else _nest(path, key, value), "", "  ", nl) + nl
    if root.kind != "object":
        raise Unreadable("the document is not an object")
    node = root
    for depth, name in enumerate(path):
        inner = node.get(name)
        if inner is None:
            return _insert(text, node, name, _nest(path[depth + 1 :], key, value))
        if inner.kind != "object":
            raise Unreadable(f"{'.'.join(path[: depth + 1])} is not an object")
        node = inner
    existing = node.get(key)
    if existing is not None:
        indent = _line_indent(text, existing.start)
        rendered = _render(value, indent, _unit(text), _newline(text))
        return text[: existing.start] + rendered + text[existing.end :]
    return _insert(text, node, key, value)


def append_element(text: str, path: tuple[str, ...], value: Any) -> str:
    """``text`` with ``value`` appended to the array at ``path`` (created if missing)."""
    node = find(parse(text), path)
    if node is None:
        return set_member(text, path[:-1], path[-1], [value])
    if node.kind != "array":
        raise Unreadable(f"{'.'.join(path)} is not an array")
    return _insert(text, node, None, value)


def remove_member(text: str, path: tuple[str, ...], key: str) -> str:
    node = find(parse(text), path)
    if node is None or node.kind != "object":
        return text
    for index, member in enumerate(node.members):
        if member.key == key:
            return _cut(text, node, index)
    return text


def remove_element(text: str, path: tuple[str, ...], index: int) -> str:
    node = find(parse(text), path)
    if node is None or node.kind != "array" or not 0 <= index < len(node.members):
        return text
    return _cut(text, node, index)


def _nest(path: tuple[str, ...], key: str, value: Any) -> Any:
    nested: Any = {key: value}
    for name in reversed(path):
        nested = {name: nested}
    return nested


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _unit(text: str) -> str:
    """The document's indentation step: the smallest indentation of a line (tabs if the
    first indented line uses them), two spaces when nothing is indented."""
    found = re.findall(r"\n([ \t]+)\S", text)
    if not found:
        return "  "
    if found[0].startswith("\t"):
        return "\t"
    return " " * min(len(f) for f in found if not f.startswith("\t"))


def _line_indent(text: str, pos: int) -> str:
    begin = text.rfind("\n", 0, pos) + 1
    match = re.match(r"[ \t]*", text[begin:pos])
    return match.group() if match else ""


def _render(value: Any, indent: str, unit: str, nl: str) -> str:
    """``value`` as JSON laid out like the document: ``unit`` per level, continuing lines
    starting at ``indent``."""
    text = json.dumps(value, indent=unit, ensure_ascii=False)
    return text.replace("\n", nl + indent)


def _inline(text: str, node: Node) -> bool:
    """Whether the container is written on one line (its first member beside the bracket)."""
    first = node.members[0].start
    return "\n" not in text[node.start : first]


def _insert(text: str, node: Node, key: str | None, value: Any) -> str:
    nl, unit = _newline(text), _unit(text)
    head = "" if key is None else json.dumps(key, ensure_ascii=False) + ": "
    if not node.members:
        outer = _line_indent(text, node.start)
        inner = outer + unit
        body = nl + inner + head + _render(value, inner, unit, nl) + nl + outer
        return text[: node.start + 1] + body + text[node.end - 1 :]
    last = node.members[-1]
    after = last.node.end
    if _inline(text, node):
        rendered = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        return text[:after] + ", " + head + rendered + text[after:]
    indent = _line_indent(text, node.members[-1].start)
    rendered = head + _render(value, indent, unit, nl)
    trailing = _comma_after(text, after, node.end - 1)
    if trailing is not None:
        at = _end_of_line(text, trailing + 1)
        return text[:at] + nl + indent + rendered + "," + text[at:]
    at = _end_of_line(text, after)
    return text[:after] + "," + text[after:at] + nl + indent + rendered + text[at:]


def _end_of_line(text: str, pos: int) -> int:
    """Past a comment that ends the line at ``pos`` (it stays with the entry before it);
    ``pos`` itself when something else follows on the line."""
    at = pos
    while at < len(text) and text[at] in " \t":
        at += 1
    if text.startswith("//", at):
        end = text.find("\n", at)
        at = len(text) if end < 0 else end
    elif text.startswith("/*", at) and "\n" not in text[at : text.find("*/", at)]:
        at = text.find("*/", at) + 2
        while at < len(text) and text[at] in " \t":
            at += 1
    return at if _ends_line(text, at) else pos


def _comma_after(text: str, pos: int, limit: int) -> int | None:
    scanner = _Scanner(text)
    scanner.pos = pos
    scanner.skip()
    if scanner.pos < limit and text[scanner.pos] == ",":
        return scanner.pos
    return None


def _cut(text: str, node: Node, index: int) -> str:
    """``text`` without member ``index`` of ``node`` and the comma that joined it: whole
    lines when the member stands on lines of its own (a comment ending the line before it
    stays there), else just its span."""
    members = node.members
    member = members[index]
    if len(members) == 1:
        return text[: node.start + 1] + text[node.end - 1 :]
    begin = _line_start(text, member.start)
    comma = _comma_after(text, member.node.end, node.end - 1)
    tail = _end_of_line(text, member.node.end if comma is None else comma + 1)
    if not text[begin : member.start].strip() and _ends_line(text, tail):
        end = tail + (2 if text.startswith("\r\n", tail) else 1 if tail < len(text) else 0)
        cut = text[:begin] + text[end:]
        if index == len(members) - 1 and comma is None:
            # the last member had no comma: the one before it loses the comma joining them
            joined = _comma_after(text, members[index - 1].node.end, node.end - 1)
            if joined is not None:
                cut = cut[:joined] + cut[joined + 1 :]
        return cut
    if index > 0:
        return text[: members[index - 1].node.end] + text[member.node.end :]
    end = members[1].start if comma is None else comma + 1
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[: member.start] + text[end:]


def _ends_line(text: str, pos: int) -> bool:
    return pos == len(text) or text.startswith("\n", pos) or text.startswith("\r\n", pos)


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1
