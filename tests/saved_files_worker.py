"""Fuzz the files an SQLite store saves beside it, in a process of its own (the test gives
it a memory cap): ``python saved_files_worker.py FOLDER SEED ROUNDS``.

It builds a store whose profile has a saved vector graph and saved edge arrays (small
thresholds, the fake embedder), keeps a pristine copy of the index folder, then for each
saved file (each data file and each manifest) and each round: puts the pristine folder back,
damages that one file (bytes flipped, cut short, grown, emptied; a manifest's fields given
wrong values; an edge file's bytes changed with its manifest's size and SHA-256 made to
match, as a forger would) and opens the store. Every recall must give the answer the
pristine store gave, and every memory the edges its rows hold; any exception is a failure
(printed, exit 1). Prints one line per file format: how many damaged copies were opened.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import slm.index.edges as edges
import slm.index.vector_cache as vector_cache
from slm import Memory, Settings

QUERIES = ["rail timetable 17", "boiler service 44", "garden Lisbon 90"]


def build(path: Path) -> tuple[list[str], dict[int, Any]]:
    """The store, and what the pristine one answers: the top id of each query, the edges."""
    talk = [
        {
            "role": "user" if i % 2 else "assistant",
            "content": f"{['rail timetable', 'boiler service', 'garden Lisbon'][i % 3]} {i}",
        }
        for i in range(120)
    ]
    with Memory(path, settings=Settings(embedder="fake")) as memory:
        memory.remember_conversation(talk, session="s")
        return answers(memory)


def answers(memory: Memory) -> tuple[list[str], dict[int, Any]]:
    tops = [memory.recall(q, k=1).results[0].memory.id for q in QUERIES]
    keys = [r.key for r in memory.list(limit=500)]
    return tops, memory.indexes.edges.edges_from(memory.profile, keys)


def flipped(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 200)):
        if out:
            out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def damaged(data: bytes, rng: random.Random) -> bytes:
    """One of: bytes flipped, cut short, grown, emptied."""
    how = rng.randrange(4)
    if how == 0:
        return flipped(data, rng)
    if how == 1:
        return data[: rng.randrange(len(data) + 1)]
    if how == 2:
        return data + bytes(rng.randrange(256) for _ in range(rng.randint(1, 4096)))
    return b""


WRONG = [None, -1, 2**70, 1.5, "x", [], {}, True, [1, "a"], "../outside", "/etc/passwd"]


def wrong_manifest(text: bytes, rng: random.Random) -> bytes:
    """A manifest with fields given wrong values, or its bytes damaged."""
    if rng.random() < 0.3:
        return damaged(text, rng)
    manifest = json.loads(text)
    for key in rng.sample(sorted(manifest), rng.randint(1, 3)):
        manifest[key] = rng.choice(WRONG)
    return json.dumps(manifest).encode()


def forged(folder: Path, name: str, rng: random.Random) -> None:
    """An edge data file damaged, its manifest's size and SHA-256 made to match it."""
    manifest_path = folder / f"{name}.json"
    manifest = json.loads(manifest_path.read_text())
    data_path = folder / manifest["file"]
    data = bytearray(data_path.read_bytes())
    for _ in range(rng.randint(1, 50)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    data_path.write_bytes(bytes(data))
    manifest["bytes"] = len(data)
    manifest["sha256"] = hashlib.sha256(name.encode() + b"\0" + bytes(data)).hexdigest()
    manifest_path.write_text(json.dumps(manifest))


def main(folder: Path, seed: int, rounds: int) -> int:
    edges.SAVE_MIN = 10
    vector_cache.EXACT_MAX = 50
    path = folder / "fuzz.db"
    expected = build(path)
    index = Path(f"{path}.index")
    pristine = folder / "pristine"
    shutil.copytree(index, pristine)
    names = {"default": "faiss", "default#edges": "edges"}
    assert all((pristine / f"{name}.json").exists() for name in names), sorted(
        p.name for p in pristine.iterdir()
    )
    rng = random.Random(seed)
    cases: list[tuple[str, Callable[[], None]]] = []
    for name, ext in names.items():
        manifest_path = index / f"{name}.json"

        def data(name: str = name, rng: random.Random = rng) -> None:
            target = index / json.loads((index / f"{name}.json").read_text())["file"]
            target.write_bytes(damaged(target.read_bytes(), rng))

        def manifest(path: Path = manifest_path, rng: random.Random = rng) -> None:
            path.write_bytes(wrong_manifest(path.read_bytes(), rng))

        cases += [(f"{ext} data", data), (f"{ext} manifest", manifest)]
    cases.append(("edges data with a matching digest", lambda: forged(index, "default#edges", rng)))
    for what, damage in cases:
        for _ in range(rounds):
            shutil.rmtree(index)
            shutil.copytree(pristine, index)
            damage()
            try:
                with Memory(path, settings=Settings(embedder="fake")) as memory:
                    got = answers(memory)
            except Exception as exc:  # any exception is what this looks for
                print(f"{what}: {type(exc).__name__}: {exc}", file=sys.stderr)
                return 1
            if got != expected:
                print(f"{what}: answers differ from the pristine store's", file=sys.stderr)
                return 1
        print(f"{what}: {rounds} damaged copies opened, answers unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
