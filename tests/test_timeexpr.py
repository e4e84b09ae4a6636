"""Tests for deterministic time-expression resolution.

Hand-computed expectations use ANCHOR = Monday 2023-05-08 13:56 UTC unless a
test says otherwise.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slm.ingest.timeexpr import (
    HORIZON_YEARS,
    TimeSpan,
    is_when_question,
    query_window,
    referenced_spans,
)

ANCHOR = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def d(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


def only(text: str, anchor: datetime = ANCHOR) -> TimeSpan:
    spans = referenced_spans(text, anchor)
    assert len(spans) == 1, spans
    return spans[0]


def bounds(text: str, anchor: datetime = ANCHOR) -> tuple[datetime, datetime, str]:
    span = only(text, anchor)
    return span.start, span.end, span.granularity


Case = tuple[str, datetime, datetime, str]

RELATIVE_DAYS: list[Case] = [
    ("today", d(2023, 5, 8), d(2023, 5, 9), "day"),
    ("yesterday", d(2023, 5, 7), d(2023, 5, 8), "day"),
    ("tomorrow", d(2023, 5, 9), d(2023, 5, 10), "day"),
    ("the day before yesterday", d(2023, 5, 6), d(2023, 5, 7), "day"),
    ("3 days ago", d(2023, 5, 5), d(2023, 5, 6), "day"),
    ("ten days ago", d(2023, 4, 28), d(2023, 4, 29), "day"),
    ("a few days ago", d(2023, 5, 4), d(2023, 5, 7), "range"),
    ("last night", d(2023, 5, 7), d(2023, 5, 8), "day"),
    ("this morning", d(2023, 5, 8), d(2023, 5, 9), "day"),
]

WEEKDAYS: list[Case] = [
    ("last Saturday", d(2023, 5, 6), d(2023, 5, 7), "day"),
    ("last Monday", d(2023, 5, 1), d(2023, 5, 2), "day"),
    ("on Saturday", d(2023, 5, 6), d(2023, 5, 7), "day"),
    ("this Saturday", d(2023, 5, 6), d(2023, 5, 7), "day"),
    ("on Monday", d(2023, 5, 8), d(2023, 5, 9), "day"),
    ("next Friday", d(2023, 5, 12), d(2023, 5, 13), "day"),
    ("next Monday", d(2023, 5, 15), d(2023, 5, 16), "day"),
]

RELATIVE_UNITS: list[Case] = [
    ("last week", d(2023, 5, 1), d(2023, 5, 8), "week"),
    ("this week", d(2023, 5, 8), d(2023, 5, 15), "week"),
    ("next week", d(2023, 5, 15), d(2023, 5, 22), "week"),
    ("2 weeks ago", d(2023, 4, 24), d(2023, 5, 1), "week"),
    ("a couple of weeks ago", d(2023, 4, 24), d(2023, 5, 1), "week"),
    ("last month", d(2023, 4, 1), d(2023, 5, 1), "month"),
    ("this month", d(2023, 5, 1), d(2023, 6, 1), "month"),
    ("next month", d(2023, 6, 1), d(2023, 7, 1), "month"),
    ("five months ago", d(2022, 12, 1), d(2023, 1, 1), "month"),
    ("last year", d(2022, 1, 1), d(2023, 1, 1), "year"),
    ("this year", d(2023, 1, 1), d(2024, 1, 1), "year"),
    ("next year", d(2024, 1, 1), d(2025, 1, 1), "year"),
    ("3 years ago", d(2020, 1, 1), d(2021, 1, 1), "year"),
    ("a year ago", d(2022, 1, 1), d(2023, 1, 1), "year"),
    ("last weekend", d(2023, 5, 6), d(2023, 5, 8), "range"),
    ("this weekend", d(2023, 5, 13), d(2023, 5, 15), "range"),
    ("next weekend", d(2023, 5, 20), d(2023, 5, 22), "range"),
]

ABSOLUTE: list[Case] = [
    ("in 2022", d(2022, 1, 1), d(2023, 1, 1), "year"),
    ("since 2016", d(2016, 1, 1), d(2017, 1, 1), "year"),
    ("May 2023", d(2023, 5, 1), d(2023, 6, 1), "month"),
    ("May of 2021", d(2021, 5, 1), d(2021, 6, 1), "month"),
    ("May 7", d(2023, 5, 7), d(2023, 5, 8), "day"),
    ("7 May", d(2023, 5, 7), d(2023, 5, 8), "day"),
    ("May 7th", d(2023, 5, 7), d(2023, 5, 8), "day"),
    ("the 7th of May", d(2023, 5, 7), d(2023, 5, 8), "day"),
    ("May 7, 2022", d(2022, 5, 7), d(2022, 5, 8), "day"),
    ("7 May 2022", d(2022, 5, 7), d(2022, 5, 8), "day"),
    ("8 May, 2023", d(2023, 5, 8), d(2023, 5, 9), "day"),
    ("Dec 25", d(2023, 12, 25), d(2023, 12, 26), "day"),
    ("2023-05-07", d(2023, 5, 7), d(2023, 5, 8), "day"),
    ("5/7/2023", d(2023, 5, 7), d(2023, 5, 8), "day"),
    ("in July", d(2022, 7, 1), d(2022, 8, 1), "month"),
    ("in May", d(2023, 5, 1), d(2023, 6, 1), "month"),
    ("last July", d(2022, 7, 1), d(2022, 8, 1), "month"),
    ("last April", d(2023, 4, 1), d(2023, 5, 1), "month"),
    ("next July", d(2023, 7, 1), d(2023, 8, 1), "month"),
    ("next April", d(2024, 4, 1), d(2024, 5, 1), "month"),
    ("last summer", d(2022, 6, 1), d(2022, 9, 1), "range"),
    ("in the summer of 2021", d(2021, 6, 1), d(2021, 9, 1), "range"),
    ("winter 2022", d(2022, 12, 1), d(2023, 3, 1), "range"),
    ("between May and July 2023", d(2023, 5, 1), d(2023, 8, 1), "range"),
    ("from 2020 to 2022", d(2020, 1, 1), d(2023, 1, 1), "range"),
    ("between 2019 and 2021", d(2019, 1, 1), d(2022, 1, 1), "range"),
]


@pytest.mark.parametrize(("text", "start", "end", "granularity"), RELATIVE_DAYS)
def test_relative_days(text: str, start: datetime, end: datetime, granularity: str) -> None:
    assert bounds(text) == (start, end, granularity)


@pytest.mark.parametrize(("text", "start", "end", "granularity"), WEEKDAYS)
def test_weekdays(text: str, start: datetime, end: datetime, granularity: str) -> None:
    assert bounds(text) == (start, end, granularity)


@pytest.mark.parametrize(("text", "start", "end", "granularity"), RELATIVE_UNITS)
def test_relative_units(text: str, start: datetime, end: datetime, granularity: str) -> None:
    assert bounds(text) == (start, end, granularity)


@pytest.mark.parametrize(("text", "start", "end", "granularity"), ABSOLUTE)
def test_absolute_and_ranges(text: str, start: datetime, end: datetime, granularity: str) -> None:
    assert bounds(text) == (start, end, granularity)


def test_last_weekday_on_a_sunday_is_yesterday() -> None:
    sunday = datetime(2023, 5, 7, 9, 0, tzinfo=UTC)
    assert bounds("last Saturday", sunday)[:2] == (d(2023, 5, 6), d(2023, 5, 7))
    assert bounds("last Sunday", sunday)[:2] == (d(2023, 4, 30), d(2023, 5, 1))


def test_case_insensitive_and_whitespace_collapsed() -> None:
    span = only("we met LAST\n  saturday")
    assert (span.start, span.text) == (d(2023, 5, 6), "LAST saturday")


def test_spans_in_order_of_appearance_and_deduplicated() -> None:
    text = "Yesterday (May 7) I ran; on 2023-05-07 again, and last week too."
    spans = referenced_spans(text, ANCHOR)
    assert [s.text for s in spans] == ["Yesterday", "last week"]
    assert [s.start for s in spans] == [d(2023, 5, 7), d(2023, 5, 1)]


def test_longest_expression_wins() -> None:
    assert only("in May 2022").granularity == "month"
    assert only("on May 7, 2022").start == d(2022, 5, 7)
    assert only("the day before yesterday").start == d(2023, 5, 6)


def test_naive_anchor_is_utc_and_aware_anchor_is_converted() -> None:
    assert only("yesterday", datetime(2023, 5, 8, 13, 56)).start == d(2023, 5, 7)
    ahead = timezone(timedelta(hours=5))
    early_local = datetime(2023, 5, 8, 1, 0, tzinfo=ahead)  # 2023-05-07 20:00 UTC
    assert only("yesterday", early_local).start == d(2023, 5, 6)


def test_locomo_style_memory_text() -> None:
    text = "I went to a LGBTQ support group yesterday and it was so powerful."
    assert [s.start for s in referenced_spans(text, ANCHOR)] == [d(2023, 5, 7)]


@pytest.mark.parametrize(
    "text",
    [
        "May I ask you something?",
        "you may be right",
        "It may rain later.",
        "The last may be the best.",
        "These 2 may help.",
        "We march on.",
        "They will march to the capital.",
        "an august institution",
        "I talked to June about it.",
        "May's idea was good.",
        "The fall of Rome.",
        "I ran 2022 meters.",
        "I visited Saturdays market",
    ],
)
def test_words_that_look_like_dates_are_ignored(text: str) -> None:
    assert referenced_spans(text, ANCHOR) == []
    assert query_window(text, ANCHOR) is None


def test_month_words_with_cues_still_count() -> None:
    assert only("In May I went to Paris.").start == d(2023, 5, 1)
    assert only("they march on May 1st").start == d(2023, 5, 1)
    assert only("in march").start == d(2023, 3, 1)


def test_query_window_month_year() -> None:
    window = query_window("What happened in July 2024?", ANCHOR)
    assert window == TimeSpan(d(2024, 7, 1), d(2024, 8, 1), "July 2024", "month")


def test_query_window_last_week() -> None:
    now = datetime(2023, 8, 17, 9, 30, tzinfo=UTC)  # a Thursday
    window = query_window("What did Caroline do last week?", now)
    assert window is not None
    assert (window.start, window.end, window.granularity) == (d(2023, 8, 7), d(2023, 8, 14), "week")


def test_query_window_none_without_time_expression() -> None:
    assert query_window("When did Caroline go to the support group?", ANCHOR) is None
    assert query_window("", ANCHOR) is None


def test_query_window_between_months() -> None:
    window = query_window("What happened between May and July 2023?", ANCHOR)
    assert window is not None
    assert (window.start, window.end, window.granularity) == (d(2023, 5, 1), d(2023, 8, 1), "range")


def test_query_window_open_ended() -> None:
    before = query_window("What did she do before June 2023?", ANCHOR)
    assert before is not None
    assert (before.start, before.end) == (d(2023 - HORIZON_YEARS, 6, 1), d(2023, 6, 1))
    after = query_window("Anything after 2021?", ANCHOR)
    assert after is not None
    assert (after.start, after.end) == (d(2022, 1, 1), d(2022 + HORIZON_YEARS, 1, 1))
    since = query_window("What changed since 2016?", ANCHOR)
    assert since is not None
    assert (since.start, since.text) == (d(2016, 1, 1), "since 2016")


def test_range_endpoint_month_takes_explicit_year_only() -> None:
    assert bounds("between December and March 2023")[:2] == (d(2022, 12, 1), d(2023, 4, 1))
    tiny = datetime(1, 1, 5, tzinfo=UTC)
    assert bounds("between December and 3 days ago", tiny)[:2] == (d(1, 1, 2), d(1, 1, 3))


def test_open_ended_only_in_queries() -> None:
    assert bounds("before June 2023")[:2] == (d(2023, 6, 1), d(2023, 7, 1))


def test_query_window_covers_several_expressions() -> None:
    window = query_window("Did she run yesterday or last Saturday?", ANCHOR)
    assert window is not None
    assert (window.start, window.end, window.granularity) == (d(2023, 5, 6), d(2023, 5, 8), "range")


@pytest.mark.parametrize(
    "text",
    [
        "When did Caroline go to the LGBTQ support group?",
        "when is the party",
        "What date did Melanie paint a sunrise?",
        "What year did John move?",
        "How long ago was Caroline's 18th birthday?",
        "what time did the concert start?",
        "Which month did they travel?",
        "In what year did she graduate?",
        "Do you remember when we met?",
        "Since when has he played guitar?",
    ],
)
def test_when_questions(text: str) -> None:
    assert is_when_question(text)


@pytest.mark.parametrize(
    "text",
    [
        "What did Caroline research?",
        "Where did she go when she was young?",
        "How long has Caroline had her dog?",
        "What is Melanie's favourite book?",
        "Whenever you like.",
        "",
    ],
)
def test_not_when_questions(text: str) -> None:
    assert not is_when_question(text)


def _check_spans(spans: list[TimeSpan]) -> None:
    for span in spans:
        assert span.start < span.end
        assert span.start.utcoffset() == timedelta(0)
        assert span.end.utcoffset() == timedelta(0)
        assert span.text


FRAGMENTS = st.sampled_from(
    [
        "last",
        "next",
        "this",
        "May",
        "may",
        "in",
        "between",
        "and",
        "to",
        "from",
        "before",
        "after",
        "since",
        "2023",
        "1900",
        "2100",
        "7th",
        "31",
        "of",
        "Saturday",
        "weekend",
        "a few",
        "days",
        "weeks",
        "ago",
        "yesterday",
        "summer",
        "winter",
        "2023-02-30",
        "2/29/2023",
        "-",
        "\u2013",
        ",",
        ".",
        "\x00",
        "\U0001f600",
        "\u05e9\u05dc\u05d5\u05dd",
        "\u200f",
        "\n",
    ]
)
TEXTS = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(FRAGMENTS, st.text(max_size=5)), max_size=30).map(" ".join),
)
EXTREME_ANCHORS = st.sampled_from(
    [datetime(1, 1, 1, tzinfo=UTC), datetime(1, 3, 2), datetime(9999, 12, 31, 23, 59, tzinfo=UTC)]
)
ANCHORS = st.one_of(
    st.just(ANCHOR),
    EXTREME_ANCHORS,
    st.datetimes(
        min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)
    ),
)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, anchor=ANCHORS)
def test_never_raises_and_spans_are_well_formed(text: str, anchor: datetime) -> None:
    _check_spans(referenced_spans(text, anchor))
    window = query_window(text, anchor)
    if window is not None:
        _check_spans([window])
    is_when_question(text)


@pytest.mark.parametrize(
    "chunk", ["1 ", "May ", "in ", "last ", "2023-", "1/", "the day before ", "a few ", "x"]
)
def test_large_adversarial_input_completes(chunk: str) -> None:
    text = chunk * (65536 // len(chunk))
    _check_spans(referenced_spans(text, ANCHOR))
    query_window(text, ANCHOR)


def test_trigger_prefilter_loses_no_expression(monkeypatch: pytest.MonkeyPatch) -> None:
    """Texts the cheap trigger scan passes over have no time expression at all: the full
    rule set finds the same spans with the prefilter switched off."""
    import re

    from slm.ingest import timeexpr, timewords

    texts = [
        "We met the day before yesterday and again tonight.",
        "Two weeks ago she moved; a couple of months back he left.",
        "See you next Friday, or this past weekend if you like.",
        "In March 2023 we went; by spring of 2024 it was done.",
        "Born 3rd of June, 1990; married 2015-06-03; moved 6/3/2016.",
        "Between May and July we hiked, from 2019 to 2021 we sailed.",
        "The Sept. 5 game, early summer, last year, this morning.",
        "Nothing here at all, just a plain sentence about gardens.",
        "May I borrow your pen? We march on. Augustine says hi.",
    ]
    anchor = datetime(2024, 6, 1, tzinfo=UTC)
    with_filter = [timeexpr.referenced_spans(t, anchor) for t in texts]
    monkeypatch.setattr(timewords, "RE_TRIGGER", re.compile(""))
    assert [timeexpr.referenced_spans(t, anchor) for t in texts] == with_filter
    assert sum(1 for spans in with_filter if spans) >= 7
