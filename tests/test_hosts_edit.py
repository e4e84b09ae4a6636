"""The text editors under ``slm setup`` (slm.hosts.jsonedit, slm.hosts.tomledit): what
they write parses to exactly the change asked for, and taking an added entry out gives the
original back byte for byte, whatever the document's layout."""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slm.hosts import jsonedit, tomledit

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
OBJECTS = st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=5)
INDENTS = st.sampled_from([None, 2, 4, "\t"])


@settings(max_examples=300, deadline=None)
@given(OBJECTS, INDENTS)
def test_the_tree_reads_what_json_reads(document: dict[str, Any], indent: Any) -> None:
    text = json.dumps(document, indent=indent)
    assert jsonedit.parse(text).python() == json.loads(text)


@settings(max_examples=300, deadline=None)
@given(OBJECTS, INDENTS, st.text(max_size=6), JSON_VALUES)
def test_a_member_added_then_removed_leaves_no_trace(
    document: dict[str, Any], indent: Any, key: str, value: Any
) -> None:
    text = json.dumps(document, indent=indent)
    added = jsonedit.set_member(text, (), key, value)
    assert json.loads(added) == {**document, key: value}
    if key not in document:
        assert jsonedit.remove_member(added, (), key) == text


@settings(max_examples=300, deadline=None)
@given(OBJECTS, INDENTS, JSON_VALUES)
def test_a_nested_member_lands_in_its_object(
    document: dict[str, Any], indent: Any, value: Any
) -> None:
    document.pop("mcpServers", None)
    document.pop("a", None)
    servers = {"other": {"command": "x"}}
    text = json.dumps({**document, "mcpServers": servers}, indent=indent)
    added = jsonedit.set_member(text, ("mcpServers",), "slm", value)
    assert json.loads(added) == {**document, "mcpServers": {**servers, "slm": value}}
    assert jsonedit.remove_member(added, ("mcpServers",), "slm") == text
    fresh = jsonedit.set_member(json.dumps(document, indent=indent), ("a", "b"), "c", value)
    assert json.loads(fresh) == {**document, "a": {"b": {"c": value}}}


@settings(max_examples=200, deadline=None)
@given(st.lists(JSON_VALUES, max_size=5), INDENTS, JSON_VALUES)
def test_an_element_appended_then_removed_leaves_no_trace(
    items: list[Any], indent: Any, value: Any
) -> None:
    text = json.dumps({"hooks": {"Stop": items}}, indent=indent)
    added = jsonedit.append_element(text, ("hooks", "Stop"), value)
    assert json.loads(added) == {"hooks": {"Stop": [*items, value]}}
    assert jsonedit.remove_element(added, ("hooks", "Stop"), len(items)) == text


@pytest.mark.parametrize(
    "text",
    [
        '{\r\n  "mcpServers": {\r\n    "a": {"command": "x"}\r\n  }\r\n}\r\n',
        '\ufeff{\n\t"mcpServers": {\n\t\t"a": {"command": "x"}, // a comment\n\t},\n}\n',
        '{\n  /* block */ "mcpServers": {\n    "a": 1 /* after */\n  }\n}',
        '{"mcpServers": {"a": 1}}',
        "{}",
        "",
        "   \n",
    ],
    ids=[
        "crlf",
        "bom-tabs-comment-trailing-comma",
        "block-comments",
        "one-line",
        "empty",
        "blank",
        "ws",
    ],
)
def test_layouts_keep_their_bytes(text: str) -> None:
    added = jsonedit.set_member(text, ("mcpServers",), "slm", {"command": "/bin/slm"})
    tree = jsonedit.parse(added)
    assert jsonedit.find(tree, ("mcpServers", "slm")) is not None
    if "\r\n" in text:
        assert "\n" not in added.replace("\r\n", "")
    if "\t" in text:
        assert '\n\t\t"slm": {\n\t\t\t"command"' in added
    if "mcpServers" in text:
        assert jsonedit.remove_member(added, ("mcpServers",), "slm") == text
    else:
        assert jsonedit.remove_member(added, (), "mcpServers").strip() == (text.strip() or "{}")
    for comment in ("// a comment", "/* block */", "/* after */"):
        assert (comment in text) == (comment in added)


@pytest.mark.parametrize(
    "text",
    ['{"a": 1,, }', '{"a": 1', "[1, 2]", '{"mcpServers": []}', '{"a": /* open', "{'a': 1}"],
)
def test_what_cannot_be_read_is_refused(text: str) -> None:
    with pytest.raises(jsonedit.Unreadable):
        jsonedit.set_member(text, ("mcpServers",), "slm", {})


SLM = {"command": "/opt/slm bin/slm", "args": ["mcp", "--profile", "default"]}


@pytest.mark.parametrize(
    "text",
    [
        "",
        'model = "o3"',
        'model = "o3"\n',
        "# only a comment\n\n",
        '[mcp_servers]\n\n[mcp_servers.gh]\ncommand = "npx" # mine\n\n[profiles.x]\nmodel = "a"\n',
        'model = "o3"\r\n[mcp_servers.gh]\r\ncommand = "npx"\r\n',
    ],
    ids=["empty", "no-newline", "one-key", "comment", "tables", "crlf"],
)
def test_a_toml_table_added_then_removed(text: str) -> None:
    added = tomledit.set_table(text, ("mcp_servers", "slm"), SLM)
    assert tomllib.loads(added)["mcp_servers"]["slm"] == SLM
    assert added.startswith(text) or not text
    assert tomledit.set_table(added, ("mcp_servers", "slm"), SLM) == added
    removed = tomledit.remove_table(added, ("mcp_servers", "slm"))
    assert tomllib.loads(removed) == tomllib.loads(text)
    if text.endswith("\n") or not text:
        assert removed == text


def test_a_toml_table_is_replaced_where_it_stands() -> None:
    text = '[mcp_servers.slm]\ncommand = "old"\n\n# after\n[other]\nk = 1\n'
    edited = tomledit.set_table(text, ("mcp_servers", "slm"), SLM)
    assert edited.endswith("\n# after\n[other]\nk = 1\n")
    assert tomllib.loads(edited)["mcp_servers"]["slm"] == SLM


@pytest.mark.parametrize(
    "text",
    [
        'mcp_servers = { slm = { command = "x" } }\n',
        'mcp_servers.slm.command = "x"\n',
        "[mcp_servers.slm\n",
    ],
)
def test_a_toml_table_written_otherwise_is_refused(text: str) -> None:
    with pytest.raises(tomledit.Unreadable):
        tomledit.set_table(text, ("mcp_servers", "slm"), SLM)
