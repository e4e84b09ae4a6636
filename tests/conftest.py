from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import postgres_server as postgres_server_module
import pytest

from slm import Memory, Settings
from slm.embed.minilm import MiniLMEmbedder

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
STORE_KINDS = ("sqlite", "postgres")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own data directory and no inherited SLM_* settings."""
    import os

    for name in list(os.environ):
        if name.startswith("SLM_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("SLM_HOME", str(tmp_path / "home"))
    # A warm hook process a test starts (a host's hooks, slm setup's checks) stops soon
    # after its last event instead of outliving the run by half an hour.
    monkeypatch.setenv("SLM_HOOK_IDLE", "60")


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    """The real model, loaded once per test session."""
    return MiniLMEmbedder()


@pytest.fixture
def memory(store_at: dict[str, Any]) -> Iterator[Memory]:
    """A new store (each kind in turn) with the deterministic fake embedder."""
    with Memory(**store_at, settings=Settings(embedder="fake")) as m:
        yield m


@pytest.fixture
def real_memory(store_at: dict[str, Any], minilm: MiniLMEmbedder) -> Iterator[Memory]:
    """A new store (each kind in turn) with the real MiniLM model."""
    with Memory(**store_at, embedder=minilm, settings=Settings()) as m:
        yield m


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[postgres_server_module.Server]:
    """A PostgreSQL server with pgvector for the whole session; skips the PostgreSQL tests
    when none can be started, unless SLM_REQUIRE_POSTGRES=1 makes that a failure."""
    try:
        server = postgres_server_module.Server()
    except postgres_server_module.Unavailable as exc:
        if postgres_server_module.REQUIRED:
            pytest.fail(f"{postgres_server_module.REQUIRE_ENV} is set: {exc}")
        pytest.skip(f"no PostgreSQL server: {exc}")
    yield server
    server.stop()


@pytest.fixture
def postgres_dsn(postgres_server: postgres_server_module.Server) -> Iterator[str]:
    """A new, empty database with the current schema, dropped after the test."""
    dsn = postgres_server.fresh_database()
    yield dsn
    postgres_server.drop_database(dsn)


@pytest.fixture(params=STORE_KINDS)
def store_at(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """Where a new store lives, as keyword arguments for ``Memory``: a SQLite file or a
    PostgreSQL database. Every test that takes it (or ``memory``) runs on both stores."""
    if request.param == "sqlite":
        return {"path": tmp_path / "store.db"}
    return {"dsn": request.getfixturevalue("postgres_dsn")}
