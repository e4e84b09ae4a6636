"""Every bad input raises InvalidInput from the documented tree and stores nothing."""

from __future__ import annotations

from typing import Any

import pytest

from slm import InvalidInput, Memory, SlmError
from slm.validate import MAX_BATCH, MAX_CONTENT_BYTES

BAD_REMEMBER: list[tuple[dict[str, Any], str]] = [
    ({"content": ""}, "content is empty"),
    ({"content": "   \n\t "}, "content is empty"),
    ({"content": "x" * (MAX_CONTENT_BYTES + 1)}, "limit is 524288 bytes"),
    ({"content": "é" * (MAX_CONTENT_BYTES // 2 + 1)}, "limit is 524288 bytes"),
    ({"content": "nul\x00byte"}, "NUL"),
    ({"content": "lone \ud800 surrogate"}, "not valid Unicode"),
    ({"content": 42}, "content must be a string"),
    ({"content": "ok", "event_time": "last tuesday-ish"}, "event_time is not an ISO 8601"),
    ({"content": "ok", "event_time": "2024-13-45"}, "event_time is not an ISO 8601"),
    ({"content": "ok", "confidence": 1.5}, "confidence must be in 0..1"),
    ({"content": "ok", "confidence": float("nan")}, "confidence must be in 0..1"),
    ({"content": "ok", "confidence": "high"}, "confidence must be a number"),
    ({"content": "ok", "metadata": "{not json"}, "metadata is not valid JSON"),
    ({"content": "ok", "metadata": "[1, 2]"}, "metadata must be a JSON object"),
    ({"content": "ok", "metadata": {"k": "v" * 20_000}}, "metadata is larger"),
    ({"content": "ok", "metadata": {"k": float("inf")}}, "not JSON-serialisable"),
    ({"content": "ok", "tags": "single-string"}, "tags must be a list"),
    ({"content": "ok", "tags": ["t" * 65]}, "longer than 64"),
    ({"content": "ok", "tags": [f"t{i}" for i in range(33)]}, "limit is 32"),
    ({"content": "ok", "source": "s" * 257}, "limit is 256"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_REMEMBER)
def test_bad_remember_is_rejected(memory: Memory, kwargs: dict[str, Any], message: str) -> None:
    kwargs = dict(kwargs)  # the parameters are shared by the runs on each store
    content = kwargs.pop("content")
    with pytest.raises(InvalidInput, match=message):
        memory.remember(content, **kwargs)
    assert memory.count() == 0


def test_invalid_input_is_part_of_the_tree() -> None:
    assert issubclass(InvalidInput, SlmError)
    assert issubclass(InvalidInput, ValueError)


def test_one_bad_item_rejects_the_whole_batch(memory: Memory) -> None:
    with pytest.raises(InvalidInput, match="item 2: content is empty"):
        memory.remember_many([{"content": "a"}, {"content": "b"}, {"content": ""}])
    with pytest.raises(InvalidInput, match="unknown field"):
        memory.remember_many([{"content": "a", "colour": "red"}])
    assert memory.count() == 0


def test_batch_size_limit(memory: Memory) -> None:
    with pytest.raises(InvalidInput, match=f"limit is {MAX_BATCH}"):
        memory.remember_many([{"content": f"m{i}"} for i in range(MAX_BATCH + 1)])
    assert memory.count() == 0


@pytest.mark.parametrize("k", [0, -1, 1001, 10**9, 2.5, True, "10"])
def test_k_out_of_range(memory: Memory, k: Any) -> None:
    memory.remember("something")
    with pytest.raises(InvalidInput, match="k must be"):
        memory.recall("something", k=k)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-0.1, "must be in 0..1, got -0.1"),
        (1.5, "must be in 0..1, got 1.5"),
        (float("nan"), "must be in 0..1"),
        ("0.5", "must be a number in 0..1, not str"),
        (True, "must be a number in 0..1, not bool"),
    ],
)
def test_min_relevance_out_of_range(memory: Memory, value: Any, message: str) -> None:
    with pytest.raises(InvalidInput, match=f"^min_relevance {message}") as refused:
        memory.recall("q", min_relevance=value)
    assert refused.value.field == "min_relevance"


@pytest.mark.parametrize("query", ["", "   ", "a\x00b", "q" * 5000, "\udfff"])
def test_bad_queries(memory: Memory, query: str) -> None:
    with pytest.raises(InvalidInput, match="query"):
        memory.recall(query)


@pytest.mark.parametrize("profile", ["", "has space", "x" * 65, "semi;colon", "ünïcode", None])
def test_bad_profile_names(tmp_path: Any, profile: Any) -> None:
    with pytest.raises(InvalidInput, match="profile must match"):
        Memory(tmp_path / "m.db", profile=profile)


@pytest.mark.parametrize("bad_id", ["", "short", "ZZZZZZZZZZZZZZZZ", "0123456789abcdef0", 7])
def test_bad_ids(memory: Memory, bad_id: Any) -> None:
    with pytest.raises(InvalidInput, match="memory id"):
        memory.get(bad_id)
    with pytest.raises(InvalidInput, match="memory id"):
        memory.forget([bad_id])


@pytest.mark.parametrize(("limit", "offset"), [(0, 0), (10_001, 0), (5, -1), ("5", 0)])
def test_bad_list_paging(memory: Memory, limit: Any, offset: Any) -> None:
    with pytest.raises(InvalidInput):
        memory.list(limit, offset)


def test_sql_and_fts_syntax_in_queries_is_just_text(memory: Memory) -> None:
    memory.remember('He said "NEAR" (OR) -not* a problem; DROP TABLE memories;')
    for query in ['"', "*", "NEAR(a b)", "OR", "-", "()", "'; DROP TABLE memories; --"]:
        memory.recall(query)
    assert memory.count() == 1
