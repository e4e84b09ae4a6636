"""Editing one table of a TOML document as text: ``[a.b]`` with its keys (and its
sub-tables ``[a.b.c]``) is added at the end, replaced where it stands, or taken out, and
every other byte (comments, order, layout) stays. The standard library reads TOML but
does not write it; a table written another way (inline, or as dotted keys) is refused
rather than rewritten."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any


class Unreadable(ValueError):
    """The text is not TOML, or holds the table in a form this module does not edit."""


def parse(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise Unreadable(str(exc)) from None


def table(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = data
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def set_table(text: str, path: tuple[str, ...], values: dict[str, Any]) -> str:
    """``text`` with table ``path`` holding exactly ``values`` (strings, lists of strings,
    and one level of sub-tables of strings)."""
    data = parse(text)
    block = _render(path, values, _newline(text))
    span = _span(text, path) if table(data, path) is not None else None
    if span is None:
        if table(data, path) is not None:
            raise Unreadable(f"[{'.'.join(path)}] is written in a form slm cannot edit in place")
        nl = _newline(text)
        # one blank line before the table, taken out again with it
        lead = "" if not text else nl if text.endswith(nl) else nl + nl
        edited = text + lead + block
    else:
        edited = text[: span[0]] + block + text[span[1] :]
    check = parse(edited)
    if table(check, path) != values:
        raise Unreadable(f"[{'.'.join(path)}] would not read back as written")
    return edited


def remove_table(text: str, path: tuple[str, ...]) -> str:
    """``text`` without table ``path`` (and the blank line before it, if any)."""
    if table(parse(text), path) is None:
        return text
    span = _span(text, path)
    if span is None:
        raise Unreadable(f"[{'.'.join(path)}] is written in a form slm cannot edit in place")
    start, end = span
    nl = _newline(text)
    if text[:start].endswith(nl + nl):
        start -= len(nl)
    return text[:start] + text[end:]


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def _header(line: str) -> tuple[str, ...] | None:
    """The dotted name of a ``[table]`` header line, None for any other line (an array of
    tables ``[[x]]`` counts as a header of its own)."""
    stripped = line.strip()
    if stripped.startswith("[["):
        return ("[[",)
    if not stripped.startswith("["):
        return None
    try:
        parsed = tomllib.loads(stripped.split("#")[0].strip() + "\n")
    except tomllib.TOMLDecodeError:
        return None
    names: list[str] = []
    node: Any = parsed
    while isinstance(node, dict) and len(node) == 1:
        name = next(iter(node))
        names.append(name)
        node = node[name]
    return tuple(names)


def _span(text: str, path: tuple[str, ...]) -> tuple[int, int] | None:
    """Where table ``path`` and its sub-tables are written as ``[headers]``: from its
    header line to the next header of another table (blank and comment lines before that
    header left outside)."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    start = None
    for number, line in enumerate(lines):
        name = _header(line)
        if start is None:
            if name == path:
                start = number
            continue
        if name is not None and name[: len(path)] != path:
            return offsets[start], offsets[_trim(lines, start, number)]
    if start is None:
        return None
    return offsets[start], offsets[_trim(lines, start, len(lines))]


def _trim(lines: list[str], start: int, end: int) -> int:
    """``end`` moved back over the blank and comment lines that end a table: they belong
    to what follows."""
    while end - 1 > start and (not lines[end - 1].strip() or lines[end - 1].lstrip()[:1] == "#"):
        end -= 1
    return end


def _render(path: tuple[str, ...], values: dict[str, Any], nl: str) -> str:
    name = ".".join(_key(p) for p in path)
    plain = {k: v for k, v in values.items() if not isinstance(v, dict)}
    nested = {k: v for k, v in values.items() if isinstance(v, dict)}
    out = [f"[{name}]"]
    out += [f"{_key(k)} = {_value(v)}" for k, v in plain.items()]
    for key, sub in nested.items():
        out.append(f"[{name}.{_key(key)}]")
        out += [f"{_key(k)} = {_value(v)}" for k, v in sub.items()]
    return nl.join(out) + nl


def _value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=False)
