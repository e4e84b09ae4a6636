from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from slm import Memory, Settings
from slm.embed.minilm import MiniLMEmbedder

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own data directory and no inherited SLM_* settings."""
    import os

    for name in list(os.environ):
        if name.startswith("SLM_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SLM_HOME", str(tmp_path / "home"))


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    """The real model, loaded once per test session."""
    return MiniLMEmbedder()


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    """A store on a temp file with the deterministic fake embedder."""
    with Memory(tmp_path / "fake.db", settings=Settings(embedder="fake")) as m:
        yield m


@pytest.fixture
def real_memory(tmp_path: Path, minilm: MiniLMEmbedder) -> Iterator[Memory]:
    """A store on a temp file with the real MiniLM model."""
    with Memory(tmp_path / "real.db", embedder=minilm, settings=Settings()) as m:
        yield m
