"""What the page shows around a memory (slm.related) and the listing's text filter, on both
stores."""

from __future__ import annotations

import pytest

from slm import Memory, NotFound
from slm.related import related


def test_related_names_entities_links_and_versions(memory: Memory) -> None:
    first, second = memory.remember_many(
        [
            {"content": "Maya: I moved to Lisbon in April", "metadata": {"session": "s1"}},
            {"content": "Sam: Lisbon is lovely in spring", "metadata": {"session": "s1"}},
        ]
    )
    newer = memory.update(first.id, "Maya: I moved to Porto in May").memory
    around = related(memory, newer.id)
    assert [v.memory.id for v in around.replaces] == [first.id]
    assert around.replaces[0].slot == ""
    older = related(memory, first.id)
    assert [v.memory.id for v in older.replaced_by] == [newer.id]
    assert any(e.name == "maya" and e.speaker for e in older.entities)
    links = {link.memory.id: link for link in related(memory, second.id).links}
    assert "prev" in links[first.id].kinds and links[first.id].weight > 0
    with pytest.raises(NotFound):
        related(memory, "0123456789abcdef")


def test_the_text_filter_matches_as_written(memory: Memory) -> None:
    memory.remember_many(
        [
            {"content": "Rent went up 5% in March"},
            {"content": "Rent went up 50 euros in May"},
            {"content": "snake_case names in the API"},
            {"content": "LISBON in capitals"},
        ]
    )
    assert [r.content for r in memory.list(text="5%")] == ["Rent went up 5% in March"]
    assert [r.content for r in memory.list(text="e_c")] == ["snake_case names in the API"]
    assert [r.content for r in memory.list(text="lisbon")] == ["LISBON in capitals"]
    assert len(memory.list(text="rent went")) == 2
    assert len(memory.list(text="   ")) == 4  # blank: no filter
