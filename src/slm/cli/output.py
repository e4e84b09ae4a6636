"""What the ``slm`` command prints for people (``--json`` prints the library's objects)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from slm.contract import RecallResponse, abstention_words
from slm.history import History
from slm.learn.reading import describe
from slm.models import MemoryRecord

if TYPE_CHECKING:
    from slm.engine import Memory

ORDER_NOTE = (
    "Ordered by ranking (how the channels agree, plus boosts); relevance (0..1) is how strongly "
    "each memory answers the question, on the same scale for every question."
)
#: Characters of a memory shown on one line of a list or a trace.
SHOWN = 160

#: Every control character (C0, DEL, C1) as the escape that shows it.
_ESCAPES = {
    **{code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))},
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
}
_ESCAPES_BUT_LINES = {code: shown for code, shown in _ESCAPES.items() if chr(code) not in "\n\t"}


def printable(text: str, lines: bool = False) -> str:
    """``text`` with its control characters shown escaped (``\\x1b``, ``\\r``, ``\\n``), so
    that what was stored or given reaches a terminal as text and never as a command to it
    (clear the screen, recolour it, retitle the window, rewrite a line). With ``lines``, line
    feeds and tabs stay as they are: the layout of a text shown whole."""
    return text.translate(_ESCAPES_BUT_LINES if lines else _ESCAPES)


def memories(count: int, width: int = 0) -> str:
    """``count`` memories in words, "1 memory" or "2 memories" (the number right-aligned in
    ``width`` characters)."""
    return f"{count:>{width}} {'memory' if count == 1 else 'memories'}"


def emit(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


def answer(data: Any, line: str, as_json: bool) -> None:
    """A command's answer: ``data`` as JSON with ``--json``, else ``line`` for people."""
    if as_json:
        emit(data)
    else:
        click.echo(line)


def one_line(text: str, width: int = SHOWN) -> str:
    """``text`` on one line: its runs of white space as one space, control characters
    escaped, cut to ``width`` characters."""
    flat = printable(" ".join(text.split()))
    return flat if len(flat) <= width else flat[: width - 3] + "..."


#: The owner keys a line names, and the word it names each by.
OWNER_WORDS = {"user_id": "user", "agent_id": "agent", "run_id": "run"}


def owner(metadata: Mapping[str, Any]) -> str | None:
    """Whose memory it is, for a line: ``user alice · agent helper`` (None: nobody's)."""
    named = [
        f"{word} {printable(str(metadata[key]))}"
        for key, word in OWNER_WORDS.items()
        if metadata.get(key) is not None
    ]
    return " · ".join(named) if named else None


def show_memory(record: MemoryRecord) -> None:
    """A memory as one entry of a list."""
    click.echo(f"{record.id}  {one_line(record.content)}")
    details = [f"event {record.event_time:%Y-%m-%d %H:%M}"]
    if (whose := owner(record.metadata)) is not None:
        details.append(whose)
    if record.source:
        details.append(f"source {printable(record.source)}")
    if record.tags:
        details.append("tags " + printable(",".join(record.tags)))
    click.echo("                  " + "  ".join(details))


def show_details(record: MemoryRecord, trust: float) -> None:
    """Everything stored with one memory (``slm get``): its text whole, line breaks kept."""
    click.echo(printable(record.content, lines=True))
    click.echo()
    rows = [
        ("id", record.id),
        ("event time", f"{record.event_time:%Y-%m-%d %H:%M:%S} UTC"),
        ("recorded", f"{record.recorded_at:%Y-%m-%d %H:%M:%S} UTC"),
        ("owner", owner(record.metadata) or "-"),
        ("source", printable(record.source or "-")),
        ("confidence", f"{record.confidence:g} (memory_confidence)"),
        ("trust", f"{trust:.3f} (trust_score of its source)"),
        ("tags", printable(", ".join(record.tags)) or "-"),
        ("valid", _validity(record)),
        ("metadata", printable(json.dumps(dict(record.metadata), ensure_ascii=False))),
    ]
    for name, value in rows:
        click.echo(f"{name:<11} {value}")


def _validity(record: MemoryRecord) -> str:
    start = f"from {record.starts:%Y-%m-%d %H:%M:%S} UTC"
    if record.valid_to is None:
        return f"{start} (current)"
    until = f"{record.valid_to:%Y-%m-%d %H:%M:%S} UTC"
    return f"{start} until {until} (superseded by {record.superseded_by})"


def show_history(told: History) -> None:
    """``slm history``: the memory, what it replaced, what replaced it, and its chain."""
    record = told.memory
    click.echo(f"{record.id}  {one_line(record.content)}")
    click.echo(f"    {_validity(record)}")
    for title, links, older in (
        ("replaced", told.replaced, True),
        ("replaced by", told.replaced_by, False),
    ):
        for link in links:
            them = link.older if older else link.newer
            how = f"{link.kind}, from {link.at[:10]}"
            if link.evidence:
                how += f", on {printable(link.evidence)}"
            click.echo(f"  {title:<11} {them.id} ({how}): {one_line(them.content, 80)}")
    if not told.replaced and not told.replaced_by:
        click.echo("  no other version: nothing replaced it and it replaced nothing")
    if len(told.chain) > 1:
        click.echo("  versions    " + " -> ".join(r.id for r in told.chain))
    if told.current.id != record.id:
        click.echo(f"  current     {told.current.id}: {one_line(told.current.content, 80)}")


def remembered(done: Any) -> str:
    """What ``slm remember`` and ``slm update`` say about one stored item (a
    :class:`slm.engine.Remembered`)."""
    if not done.created:
        return f"already stored as {done.memory.id} (identical content)"
    line = f"remembered {done.memory.id}"
    if done.replaced:
        line += f"; it replaces {', '.join(done.replaced)}"
    if done.updates:
        line += f"; it probably updates {', '.join(done.updates)} (same fact, another value)"
    return line


def abstention(response: RecallResponse, minimum: float | None) -> str | None:
    """Why a recall abstained, in words, a ``minimum`` relevance named as the option."""
    return abstention_words(response, minimum, "the --min-relevance asked for")


def show_response(response: RecallResponse, minimum: float | None = None) -> None:
    """A recall's results: content, then relevance, ranking and where the memory is from
    (``minimum``: the relevance the caller asked for at least)."""
    if response.answer_confidence is not None:
        click.echo(
            f"answer confidence {response.answer_confidence:.2f} (the calibrated chance that "
            f"these results hold the answer; {response.calibration_id})"
        )
    if response.abstained:
        click.echo(abstention(response, minimum))
        if not response.results:
            return
    reordered = False
    previous = None
    for result in response.results:
        memory = result.memory
        click.echo(f"{result.rank_position:>2}. {one_line(memory.content)}")
        details = [
            f"relevance {result.relevance_score:.2f}",
            f"ranking {result.ranking_score:.4f}",
            f"{memory.event_time:%Y-%m-%d}",
        ]
        if (whose := owner(memory.metadata)) is not None:
            details.append(whose)
        if memory.source:
            details.append(f"source {printable(memory.source)}")
        details.append(f"id {memory.id}")
        click.echo("    " + " · ".join(details))
        if memory.superseded_by is not None and memory.valid_to is not None:
            click.echo(f"    superseded by {memory.superseded_by} on {memory.valid_to:%Y-%m-%d}")
        if result.possibly_superseded_by:
            click.echo(f"    possibly superseded by {', '.join(result.possibly_superseded_by)}")
        reordered = reordered or (previous is not None and result.relevance_score > previous)
        previous = result.relevance_score
    if reordered:
        click.echo(f"\n{ORDER_NOTE}")


def show_trace(response: RecallResponse, contents: Mapping[str, str]) -> None:
    """A recall explained: the question as read, each channel's top hits, each result's
    evidence. ``contents`` maps the ids in the trace to their text."""
    trace: dict[str, Any] = dict(response.trace or {})
    query = trace["query"]
    click.echo(f"query    {query['text']!r}")
    if query["embedded_text"] != query["text"]:
        click.echo(f"embedded {query['embedded_text']!r}")
    click.echo(f"terms    {printable(' '.join(query['terms'])) or '-'}")
    click.echo(f"entities {printable(', '.join(query['entities'])) or '-'}")
    window = query["time_window"]
    when = (
        f"{window['start'][:10]} .. {window['end'][:10]} ({printable(window['text'])})"
        if window
        else "-"
    )
    click.echo(f"window   {when}" + ("   [when-question]" if query["when_question"] else ""))
    fusion = trace["fusion"]
    weights = ", ".join(f"{n} {w:g}" for n, w in fusion["weights"].items())
    click.echo(f"fusion   weighted RRF, k={fusion['k']:g}; weights {weights}\n")
    for name, run in trace["channels"].items():
        if not run["ran"]:
            why = run["error"] or run["reason"]
            click.echo(f"{name:<10} did not run ({printable(str(why))})")
            continue
        click.echo(f"{name:<10} {len(run['candidates'])} candidates in {run['ms']:.1f} ms")
        for hit in run["candidates"][:5]:
            text = one_line(contents.get(hit["id"], ""), 60)
            click.echo(f"    #{hit['rank']:<3} {hit['score']:>10.4f}  {hit['id']}  {text}")
    click.echo()
    if response.abstained:
        click.echo(abstention(response, (trace.get("min_relevance") or {}).get("min_relevance")))
    for result, detail in zip(response.results, trace["results"], strict=True):
        ranks = ", ".join(f"{n} #{c['rank']}" for n, c in detail["channels"].items())
        whose = owner(result.memory.metadata)
        click.echo(
            f"{result.rank_position:>2}. [relevance {result.relevance_score:.2f}] "
            + (f"({whose}) " if whose else "")
            + one_line(result.memory.content)
        )
        click.echo(
            f"      {detail['evidence']}; cos {detail['cosine']:.2f}, "
            f"lexical {detail['lexical_coverage']:.2f}, window {detail['time_window_match']}; "
            f"boost {detail['entity_graph_boost']:.4f}, role {detail['role_boost']:.4f}, "
            f"fact {detail['fact_boost']:.4f}; {ranks}"
        )
        reading = detail.get("features")
        if reading:
            click.echo(f"      read: {describe(reading)}")
    calibration = trace.get("calibration")
    if calibration is not None:
        if calibration["applied"]:
            click.echo(
                f"\nanswer confidence {response.answer_confidence:.2f} "
                f"({calibration['calibration_id']})"
            )
        else:
            click.echo(f"\nuncalibrated: {calibration['reason']}")
    steps = ", ".join(f"{step} {ms:.1f}" for step, ms in trace.get("timings_ms", {}).items())
    click.echo(f"\n{trace['total_ms']:.1f} ms" + (f" ({steps})" if steps else ""))


#: Seconds between two progress lines when stderr is not a terminal.
PROGRESS_EVERY = 3.0


@contextmanager
def progress(total: int, label: str, quiet: bool) -> Iterator[Callable[[int], None]]:
    """A callback counting work done: a progress bar on a terminal, else a line on stderr
    every ``PROGRESS_EVERY`` seconds and, when it printed one, at the end (work done faster
    than that shows only the command's own summary); nothing with ``quiet``."""
    if quiet:
        yield lambda done: None
        return
    if sys.stderr.isatty():
        with click.progressbar(length=total, label=label, file=sys.stderr) as bar:
            yield bar.update
        return
    count, last, shown = 0, time.monotonic(), False

    def update(done: int) -> None:
        nonlocal count, last, shown
        count += done
        if time.monotonic() - last >= PROGRESS_EVERY or (shown and count >= total):
            click.echo(f"{label} {count} of {total}", err=True)
            last, shown = time.monotonic(), True

    yield update


@contextmanager
def passages_read(memory: Memory, size: int) -> Iterator[None]:
    """Progress on stderr while ``memory`` stores a long text of ``size`` bytes: the
    passages embedded so far, a line every ``PROGRESS_EVERY`` seconds, and the step after
    them (its words, entities and facts read, then stored)."""
    click.echo(f"slm: storing a text of {size // 1024} KiB", err=True)
    reporting = getattr(memory.embedder, "reporting", None)
    if reporting is None:
        yield
        return
    last = time.monotonic()

    def told(done: int, total: int) -> None:
        nonlocal last
        if done == total:
            click.echo(f"slm: {total} passages embedded; reading and storing the text", err=True)
        elif time.monotonic() - last >= PROGRESS_EVERY:
            click.echo(f"slm: {done} of {total} passages embedded", err=True)
            last = time.monotonic()

    with reporting(told):
        yield
