"""Deterministic, zero-LLM resolution of English time expressions.

Two uses share one scanner:

* ingest: ``referenced_spans(text, anchor)`` resolves every date a memory's
  text mentions against the memory's event time (when it was said);
* recall: ``query_window(text, now)`` turns a question's time expressions
  into one window, resolved against "now".

Conventions (all spans are ``[start, end)`` in UTC; naive inputs are UTC):

* Weeks start on Monday (ISO). A weekend is that week's Saturday and Sunday.
* "last Saturday" is the most recent Saturday strictly before the anchor day
  (LoCoMo's gold answers read it as "the Saturday before <date>"); "next
  Friday" is the nearest Friday strictly after it. A bare or "this"/"on"
  weekday is the most recent one on or before the anchor day, because
  memories and questions mostly talk about the past.
* "last/this/next weekend" is the weekend of the previous/current/next week.
* A bare month ("in July") is the most recent such month on or before the
  anchor's month, "last July" the most recent one strictly before it, "this
  July" the anchor's year, "next July" the first one strictly after.
* A day without a year ("May 7") always takes the anchor's year, even when
  that lands in the anchor's future: it keeps resolution predictable.
* "a few" / "several" N units ago is fuzzy: it covers 2 to 4 units ago with
  granularity "range". "a couple of" is exactly 2.
* Seasons are northern-hemisphere meteorological seasons (spring = March to
  May, ...); the winter of year Y runs from December Y to the end of
  February Y+1.
* Query windows only: "before X", "after X", "since X", "until X" become
  open-ended windows clipped to ``HORIZON_YEARS`` on the open side. During
  ingest those words are ignored and X itself is reported.
* "May", "March", "August", "April" and "June" double as ordinary words or
  names, so without a day number or a year they need a cue: "last"/"next"/
  "this" or a time preposition ("in", "since", "of", ...; not "to"/"by",
  which precede names). Lower-case "may"/"march"/"august" after a cue is
  still rejected when the next word reads as a verb phrase ("the last may
  be"), and a possessive ("May's") is always a name.
* Years need a cue ("in 2022", "since 2016", "year 2019") unless they are
  part of a fuller date, so counts like "2022 meters" are ignored.
* ``TimeSpan.text`` is the expression itself with whitespace collapsed; a
  bare preposition cue ("in" of "in 2022") is not part of it, a modifier
  ("last" of "last July") is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from slm.ingest import timewords as words

__all__ = [
    "HORIZON_YEARS",
    "TimeSpan",
    "is_when_question",
    "query_window",
    "referenced_spans",
]

HORIZON_YEARS = 50
_ONE_DAY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class TimeSpan:
    """A resolved time expression: ``[start, end)`` in UTC."""

    start: datetime
    end: datetime
    text: str
    granularity: str


@dataclass(frozen=True, slots=True)
class _Hit:
    pos: int
    end: int
    span: TimeSpan


_Handler = Callable[[re.Match[str], date], TimeSpan | None]

# ------------------------------------------------------------ date helpers


def _utc(dt: datetime) -> datetime:
    if dt.tzinfo is None or dt.utcoffset() is None:
        return dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def _midnight(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


def _span(start: date, end: date, text: str, granularity: str) -> TimeSpan:
    return TimeSpan(_midnight(start), _midnight(end), text, granularity)


def _shift_month(year: int, month: int, delta: int) -> tuple[int, int]:
    index = year * 12 + month - 1 + delta
    return index // 12, index % 12 + 1


def _month_bounds(year: int, month: int, months: int = 1) -> tuple[date, date]:
    end_year, end_month = _shift_month(year, month, months)
    return date(year, month, 1), date(end_year, end_month, 1)


def _month_span(year: int, month: int, text: str) -> TimeSpan:
    start, end = _month_bounds(year, month)
    return _span(start, end, text, "month")


def _unit_bounds(day: date, unit: str, offset: int) -> tuple[date, date]:
    """The calendar ``unit`` containing ``day``, shifted by ``offset`` units."""
    if unit == "day":
        start = day + timedelta(days=offset)
        return start, start + _ONE_DAY
    if unit in ("week", "weekend"):
        monday = day - timedelta(days=day.weekday()) + timedelta(weeks=offset)
        if unit == "weekend":
            return monday + timedelta(days=5), monday + timedelta(days=7)
        return monday, monday + timedelta(days=7)
    if unit == "month":
        return _month_bounds(*_shift_month(day.year, day.month, offset))
    return date(day.year + offset, 1, 1), date(day.year + offset + 1, 1, 1)


def _add_years(dt: datetime, years: int) -> datetime:
    year = min(9999, max(1, dt.year + years))
    day = 28 if (dt.month, dt.day) == (2, 29) else dt.day
    return dt.replace(year=year, day=day)


def _month_num(word: str) -> int:
    return words.MONTHS[word.lower().rstrip(".")]


def _is_lower_ambiguous(word: str) -> bool:
    return word.lower() in words.AMBIGUOUS_LOWER and not word[:1].isupper()


def _count(token: str) -> tuple[int, bool]:
    """The number a quantity word stands for, and whether it is fuzzy."""
    word = token.lower()
    if word in ("a few", "few", "several"):
        return 3, True
    if "couple" in word:
        return 2, False
    if word.isdigit():
        return int(word), False
    return words.WORD_NUMBERS[word], False


# ---------------------------------------------------------------- handlers


def _on_relative_day(m: re.Match[str], day: date) -> TimeSpan:
    phrase = m.group("x").lower()
    if phrase.startswith("the day before"):
        offset = -2
    elif phrase.startswith("the day after"):
        offset = 2
    elif phrase in ("yesterday", "last night"):
        offset = -1
    else:
        offset = 1 if phrase == "tomorrow" else 0
    start, end = _unit_bounds(day, "day", offset)
    return _span(start, end, m.group("x"), "day")


def _on_ago(m: re.Match[str], day: date) -> TimeSpan:
    count, fuzzy = _count(m.group("n"))
    unit = m.group("u").lower()
    sign = 1 if m.group("dir").lower() == "from now" else -1
    if not fuzzy:
        start, end = _unit_bounds(day, unit, sign * count)
        return _span(start, end, m.group("x"), words.GRANULARITY[unit])
    near = _unit_bounds(day, unit, sign * (count - 1))
    far = _unit_bounds(day, unit, sign * (count + 1))
    return _span(min(near[0], far[0]), max(near[1], far[1]), m.group("x"), "range")


def _on_unit(m: re.Match[str], day: date) -> TimeSpan:
    unit = m.group("u").lower()
    start, end = _unit_bounds(day, unit, words.DIRECTION[m.group("mod").lower()])
    return _span(start, end, m.group("x"), words.GRANULARITY[unit])


def _on_weekday(m: re.Match[str], day: date) -> TimeSpan:
    target = words.WEEKDAYS.index(m.group("wd").lower())
    direction = words.DIRECTION.get((m.group("mod") or "").lower(), 0)
    back = (day.weekday() - target) % 7
    if direction < 0:
        offset = -(back or 7)
    elif direction > 0:
        offset = (target - day.weekday()) % 7 or 7
    else:
        offset = -back
    start, end = _unit_bounds(day, "day", offset)
    return _span(start, end, m.group("x"), "day")


def _plausible_month(m: re.Match[str], word: str, mod: str) -> bool:
    if word.lower() not in words.CUE_NEEDED:
        return True
    cue = (m.group("cue") or "").lower()
    if not mod and cue in words.NAME_CUES | {""}:
        return False
    if m.string.startswith("'s", m.end("x")):
        return False
    return not (_is_lower_ambiguous(word) and words.RE_NOT_MONTH_NEXT.match(m.string, m.end("x")))


def _on_bare_month(m: re.Match[str], day: date) -> TimeSpan | None:
    word = m.group("mon")
    mod = (m.group("mod") or "").lower()
    if not _plausible_month(m, word, mod):
        return None
    month = _month_num(word)
    direction = words.DIRECTION.get(mod)
    if direction is None:
        year = day.year - (1 if month > day.month else 0)
    elif direction < 0:
        year = day.year - (1 if month >= day.month else 0)
    elif direction > 0:
        year = day.year + (1 if month <= day.month else 0)
    else:
        year = day.year
    return _month_span(year, month, m.group("x"))


def _on_month_year(m: re.Match[str], day: date) -> TimeSpan:
    return _month_span(int(m.group("y")), _month_num(m.group("mon")), m.group("x"))


def _on_calendar_day(m: re.Match[str], day: date) -> TimeSpan:
    year = int(m.group("y")) if m.group("y") else day.year
    start = date(year, _month_num(m.group("mon")), int(m.group("d")))
    return _span(start, start + _ONE_DAY, m.group("x"), "day")


def _on_day_month(m: re.Match[str], day: date) -> TimeSpan | None:
    # "these 2 may help" must not become 2 May; a lower-case modal needs an
    # ordinal, "of" or a year to count as a date.
    strong = m.group("o") or m.group("of") or m.group("y")
    if _is_lower_ambiguous(m.group("mon")) and not strong:
        return None
    return _on_calendar_day(m, day)


def _on_numeric(m: re.Match[str], day: date) -> TimeSpan:
    start = date(int(m.group("y")), int(m.group("m")), int(m.group("d")))
    return _span(start, start + _ONE_DAY, m.group("x"), "day")


def _on_year(m: re.Match[str], day: date) -> TimeSpan:
    year = int(m.group("x"))
    return _span(date(year, 1, 1), date(year + 1, 1, 1), m.group("x"), "year")


def _on_year_range(m: re.Match[str], day: date) -> TimeSpan | None:
    first, last = int(m.group("a")), int(m.group("b"))
    # "2020 and 2022" lists two years; only "between 2020 and 2022" is a range.
    if first > last or (m.group("conn").lower() == "and" and not m.group("pre")):
        return None
    return _span(date(first, 1, 1), date(last + 1, 1, 1), m.group("x"), "range")


def _season_bounds(year: int, season: str) -> tuple[date, date]:
    return _month_bounds(year, words.SEASON_START[season], 3)


def _on_season(m: re.Match[str], day: date) -> TimeSpan | None:
    season = m.group("s").lower()
    mod = (m.group("mod") or "").lower()
    if m.group("y"):
        start, end = _season_bounds(int(m.group("y")), season)
        return _span(start, end, m.group("x"), "range")
    if not (mod or m.group("cue")):
        return None
    options = [_season_bounds(y, season) for y in range(day.year - 2, day.year + 2)]
    direction = words.DIRECTION.get(mod)
    if direction is None:
        start, end = [o for o in options if o[0] <= day][-1]
    elif direction < 0:
        start, end = [o for o in options if o[1] <= day][-1]
    elif direction > 0:
        start, end = next(o for o in options if o[0] > day)
    else:
        winter_started_last_year = season == "winter" and day.month < 3
        year = day.year - (1 if winter_started_last_year else 0)
        start, end = _season_bounds(year, season)
    return _span(start, end, m.group("x"), "range")


# More specific rules first: equal-length overlaps keep the earlier rule.
_RULES: tuple[tuple[re.Pattern[str], _Handler], ...] = (
    (words.RE_ISO, _on_numeric),
    (words.RE_US, _on_numeric),
    (words.RE_YEAR_RANGE, _on_year_range),
    (words.RE_MONTH_DAY, _on_calendar_day),
    (words.RE_DAY_MONTH, _on_day_month),
    (words.RE_MONTH_YEAR, _on_month_year),
    (words.RE_SEASON, _on_season),
    (words.RE_RELATIVE_DAY, _on_relative_day),
    (words.RE_AGO, _on_ago),
    (words.RE_UNIT, _on_unit),
    (words.RE_WEEKDAY, _on_weekday),
    (words.RE_BARE_MONTH, _on_bare_month),
    (words.RE_YEAR, _on_year),
)

# ------------------------------------------------------------------ scanner


def _candidates(text: str, day: date) -> list[_Hit]:
    hits: list[_Hit] = []
    for pattern, handler in _RULES:
        for m in pattern.finditer(text):
            try:
                span = handler(m, day)
            except (ValueError, OverflowError, IndexError):
                # Impossible dates (Feb 30) or years outside 1..9999.
                continue
            if span is not None:
                hits.append(_Hit(m.start("x"), m.end("x"), span))
    return hits


def _select(hits: list[_Hit]) -> list[_Hit]:
    """Longest expressions win; shorter ones inside them are dropped."""
    taken = bytearray(max((h.end for h in hits), default=0))
    chosen: list[_Hit] = []
    for hit in sorted(hits, key=lambda h: (h.pos - h.end, h.pos)):
        if 1 in taken[hit.pos : hit.end]:
            continue
        taken[hit.pos : hit.end] = b"\x01" * (hit.end - hit.pos)
        chosen.append(hit)
    return sorted(chosen, key=lambda h: h.pos)


def _reanchor_month(left: TimeSpan, right: TimeSpan) -> TimeSpan:
    """In "between May and July 2023" the first month takes the second's year."""
    if left.granularity != "month" or words.RE_DIGIT.search(left.text):
        return left
    if not words.RE_HAS_YEAR.search(right.text):
        return left
    month = left.start.month
    year = right.start.year - (1 if month > right.start.month else 0)
    return _month_span(year, month, left.text)


def _try_range(text: str, left: _Hit, right: _Hit) -> _Hit | None:
    gap = words.RE_RANGE_GAP.fullmatch(text, left.end, right.pos)
    if gap is None:
        return None
    pre = words.RE_RANGE_PRE.search(text, max(0, left.pos - 12), left.pos)
    if pre is None and gap.group("c").lower() == "and":
        return None
    first = _reanchor_month(left.span, right.span)
    start = min(first.start, right.span.start)
    end = max(first.end, right.span.end)
    pos = pre.start() if pre else left.pos
    return _Hit(pos, right.end, TimeSpan(start, end, text[pos : right.end], "range"))


def _merge_ranges(text: str, hits: list[_Hit]) -> list[_Hit]:
    merged: list[_Hit] = []
    i = 0
    while i < len(hits):
        joined = _try_range(text, hits[i], hits[i + 1]) if i + 1 < len(hits) else None
        merged.append(joined or hits[i])
        i += 2 if joined else 1
    return merged


def _open_ended(text: str, hit: _Hit) -> _Hit:
    m = words.RE_OPEN.search(text, max(0, hit.pos - 14), hit.pos)
    if m is None:
        return hit
    op, span = m.group("op").lower(), hit.span
    if op in ("after", "later than"):
        start, end = span.end, _add_years(span.end, HORIZON_YEARS)
    elif op == "since":
        start, end = span.start, _add_years(span.start, HORIZON_YEARS)
    elif op in ("until", "till"):
        start, end = _add_years(span.end, -HORIZON_YEARS), span.end
    else:
        start, end = _add_years(span.start, -HORIZON_YEARS), span.start
    surface = text[m.start() : hit.end]
    return _Hit(m.start(), hit.end, TimeSpan(start, end, surface, "range"))


def _dedupe(spans: Iterable[TimeSpan]) -> list[TimeSpan]:
    seen: set[tuple[datetime, datetime]] = set()
    out: list[TimeSpan] = []
    for span in spans:
        key = (span.start, span.end)
        if span.start < span.end and key not in seen:
            seen.add(key)
            out.append(span)
    return out


def _scan(text: str, anchor: datetime, query: bool) -> list[TimeSpan]:
    if not words.RE_TRIGGER.search(text):
        return []
    norm = words.RE_WS.sub(" ", text)
    hits = _merge_ranges(norm, _select(_candidates(norm, _utc(anchor).date())))
    if query:
        hits = [_open_ended(norm, hit) for hit in hits]
    return _dedupe(hit.span for hit in hits)


# --------------------------------------------------------------- public API


def referenced_spans(text: str, anchor: datetime) -> list[TimeSpan]:
    """Every resolvable time expression in ``text``, resolved against ``anchor``.

    Spans come in order of appearance; a span equal to an earlier one is
    dropped. Whitespace in ``TimeSpan.text`` is collapsed to single spaces.
    """
    return _scan(text, anchor, query=False)


def query_window(text: str, now: datetime) -> TimeSpan | None:
    """The window covering every time expression in a question, or None."""
    spans = _scan(text, now, query=True)
    if len(spans) <= 1:
        return spans[0] if spans else None
    start = min(s.start for s in spans)
    end = max(s.end for s in spans)
    return TimeSpan(start, end, ", ".join(s.text for s in spans), "range")


_RE_WHEN_QUESTION = re.compile(
    r"(?:^|[.?!;:,\"'(] ?)(?:(?:and|so|but|then|ok|okay|also) )?when\b"
    r"|\b(?:since|by|until|till|know|remember|recall|tell me|wonder) when\b"
    r"|\b(?:what|which)(?: exact| specific| particular)? (?:date|dates|day|year"
    r"|years|month|months|week|weekday|season|time)\b"
    r"|\bwhat(?:'s| is| was) the date\b"
    r"|\b(?:in|on|at|during) what (?:date|day|year|month|season|time)\b"
    r"|\bhow long ago\b"
    r"|\bhow many (?:days|weeks|months|years) ago\b",
    words.F,
)


def is_when_question(text: str) -> bool:
    """Whether a question asks for a point in time rather than a fact."""
    return _RE_WHEN_QUESTION.search(words.RE_WS.sub(" ", text).strip()) is not None
