"""How long remembering one long text takes, by its size (issue #61: remembering is linear
in the text's length).

    python docs/results/long-text.py [--text FILE] [--sizes 5000,50000,500000,5000000]

Each size is a file of that many bytes (the start of ``--text``, else prose this script
writes: dated sentences about people, places and things, from a seeded generator), read
and stored with ``Memory.remember`` in a new SQLite store (the model loaded before the
first, so only remembering is timed), the way ``slm remember - < FILE`` stores it, minus
the command's start-up. A text over the limit (512 KiB) is refused: the time to the
refusal is reported. Prints one JSON object: seconds per size and the ratio of each to
the one ten times smaller.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import tempfile
import time
from pathlib import Path

from slm import InvalidInput, Memory

NAMES = "Ana Jordan Priya Mateo Caroline Sam Lena Omar Yuki Tomas Ines Farid Greta Hiro".split()
PLACES = "Lisbon Porto Berlin Madrid Oslo Kyoto Denver Nairobi Leeds Austin Vilnius".split()
VERBS = ["met", "called", "emailed", "visited", "helped", "thanked", "argued with", "cooked for"]
THINGS = [
    "the budget review", "the garden project", "a new bike", "the quarterly report",
    "the database migration", "a birthday party", "the hiking trip", "the library move",
    "the kitchen renovation", "a conference talk", "the tax return", "the school play",
]  # fmt: skip
MONTHS = "January February March April May June July August September October".split()


def prose(size: int, seed: int = 0) -> str:
    """``size`` bytes of generated prose, paragraphs of dated sentences."""
    rnd = random.Random(seed)
    out: list[str] = []
    total = 0
    while total < size:
        who, other, place, thing = (
            rnd.choice(NAMES), rnd.choice(NAMES), rnd.choice(PLACES), rnd.choice(THINGS),
        )  # fmt: skip
        sentence = rnd.choice(
            [
                f"On {rnd.randint(1, 28)} {rnd.choice(MONTHS)} {rnd.randint(2019, 2025)}, "
                f"{who} {rnd.choice(VERBS)} {other} in {place} about {thing}.",
                f"{who} said that {thing} would cost {rnd.randint(10, 999)} euros and take "
                f"{rnd.randint(2, 30)} days.",
                f"I think {thing} went well, although {who} was late again.",
                f"We talked for {rnd.randint(5, 90)} minutes about {thing} and agreed to "
                f"meet in {place} next {rnd.choice(MONTHS)}.",
            ]
        )
        out.append(sentence + ("\n\n" if rnd.random() < 0.1 else " "))
        total += len(sentence) + 1
    return "".join(out).encode("utf-8")[:size].decode("utf-8", "ignore")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--text", type=Path, help="Slice the texts from this file.")
    parser.add_argument("--sizes", default="5000,50000,500000,5000000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    source = args.text.read_bytes() if args.text else None
    seconds: dict[str, float] = {}
    refused: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "long.db") as memory:
        memory.remember("The model is loaded before the first text is timed.")
        for size in sizes:
            text = source[:size].decode("utf-8", "ignore") if source is not None else prose(size)
            path = Path(tmp) / f"{size}.txt"
            path.write_text(text, encoding="utf-8")
            started = time.perf_counter()
            try:
                memory.remember(path.read_text(encoding="utf-8"))
            except InvalidInput as exc:
                refused[str(size)] = str(exc)
            seconds[str(size)] = round(time.perf_counter() - started, 2)
    ratios = {
        f"{big}/{small}": round(seconds[str(big)] / seconds[str(small)], 2)
        for small, big in itertools.pairwise(sizes)
        if str(big) not in refused and seconds[str(small)]
    }
    print(
        json.dumps(
            {"text": str(args.text) if args.text else "generated prose", "seconds": seconds,
             "ratio": ratios, "refused": refused},
            indent=2,
        )
    )  # fmt: skip


if __name__ == "__main__":
    main()
