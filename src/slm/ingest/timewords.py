"""The English words and patterns time expressions are made of, for
:mod:`slm.ingest.timeexpr`: month, weekday and number words, the cues a month name or
a year needs, and the compiled patterns of each kind of expression."""

from __future__ import annotations

import re

# ---------------------------------------------------------------- vocabulary

MONTH_FULL = "january|february|march|april|may|june|july|august|september|october|november|december"
MONTH_NAMES = tuple(MONTH_FULL.split("|"))
MONTHS: dict[str, int] = {name: i + 1 for i, name in enumerate(MONTH_NAMES)}
MONTHS.update({name[:3]: i + 1 for i, name in enumerate(MONTH_NAMES)})
MONTHS["sept"] = 9
WEEKDAY_ALT = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
WEEKDAYS = tuple(WEEKDAY_ALT.split("|"))
NUMBER_ALT = "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
WORD_NUMBERS = {word: i + 1 for i, word in enumerate(NUMBER_ALT.split("|"))}
WORD_NUMBERS.update({"a": 1, "an": 1})
BACKWARD = ("last", "past", "previous", "this past")
DIRECTION = {**dict.fromkeys(BACKWARD, -1), "this": 0, "next": 1, "coming": 1}
GRANULARITY = {**{u: u for u in ("day", "week", "month", "year")}, "weekend": "range"}
SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
# Month names that are also common words or given names need a cue.
CUE_NEEDED = frozenset({"may", "march", "april", "june", "august"})
# "talked to June", "a book by April": these cues precede names too often.
NAME_CUES = frozenset({"to", "by", "around"})
# Lower-case forms that are far more often a modal verb, verb or adjective.
AMBIGUOUS_LOWER = frozenset({"may", "march", "august", "mar", "aug"})

# ------------------------------------------------------------------ patterns
# Input whitespace is collapsed to single spaces first, so every pattern is a
# bounded sequence of literal words: no nested or unbounded quantifiers, which
# keeps each scan linear in the input length.

F = re.IGNORECASE
YEAR = r"(?:19[0-9]{2}|20[0-9]{2}|2100)(?![0-9])"
MONTH_ANY = MONTH_FULL + "|sept|jan|feb|mar|apr|jun|jul|aug|sep|oct|nov|dec"
NUM = rf"[0-9]{{1,3}}|{NUMBER_ALT}|a couple of|a couple|couple of|a few|few|several|an|a"
MOD = r"this past|last|past|previous|this|next|coming"
CUE = (
    r"in|during|of|from|between|since|until|till|through|before|after|by"
    r"|around|early|late|mid|to"
)
ORD = r"(?P<o>st|nd|rd|th)?"

RE_RELATIVE_DAY = re.compile(
    r"\b(?P<x>the day before yesterday|the day after tomorrow|yesterday|today"
    r"|tonight|tomorrow|last night|this (?:morning|afternoon|evening))\b",
    F,
)
RE_AGO = re.compile(
    rf"\b(?P<x>(?P<n>{NUM}) (?P<u>day|weekend|week|month|year)s? "
    r"(?P<dir>ago|back|from now))\b",
    F,
)
RE_UNIT = re.compile(
    r"\b(?P<x>(?P<mod>this past|last|previous|this|next|coming) "
    r"(?P<u>weekend|week|month|year))\b",
    F,
)
RE_WEEKDAY = re.compile(rf"\b(?P<x>(?:(?P<mod>{MOD}) )?(?P<wd>{WEEKDAY_ALT}))\b", F)
RE_BARE_MONTH = re.compile(
    rf"\b(?:(?P<cue>{CUE})[ -])?(?P<x>(?:(?P<mod>{MOD}) )?(?P<mon>{MONTH_FULL}))\b",
    F,
)
RE_MONTH_YEAR = re.compile(rf"\b(?P<x>(?P<mon>{MONTH_ANY})\b\.?(?:,| of)? (?P<y>{YEAR}))", F)
RE_MONTH_DAY = re.compile(
    rf"\b(?P<x>(?P<mon>{MONTH_ANY})\b\.? (?P<d>[0-9]{{1,2}}){ORD}\b"
    rf"(?:,? (?P<y>{YEAR}))?)",
    F,
)
RE_DAY_MONTH = re.compile(
    rf"(?<![0-9])(?P<x>(?P<d>[0-9]{{1,2}}){ORD}(?P<of> of)? (?P<mon>{MONTH_ANY})\b"
    rf"\.?(?:,? (?P<y>{YEAR}))?)",
    F,
)
RE_ISO = re.compile(
    rf"(?<![0-9])(?P<x>(?P<y>{YEAR})-(?P<m>[0-9]{{1,2}})-(?P<d>[0-9]{{1,2}}))(?![0-9])"
)
RE_US = re.compile(rf"(?<![0-9/])(?P<x>(?P<m>[0-9]{{1,2}})/(?P<d>[0-9]{{1,2}})/(?P<y>{YEAR}))")
RE_YEAR = re.compile(rf"\b(?P<cue>{CUE}|year)[ -](?P<x>{YEAR})", F)
RE_YEAR_RANGE = re.compile(
    rf"\b(?P<x>(?:(?P<pre>between|from) (?:the years? )?)?(?P<a>{YEAR}) ?"
    rf"(?P<conn>and|to|until|till|through|-|\u2013) ?(?P<b>{YEAR}))",
    F,
)
RE_SEASON = re.compile(
    rf"\b(?:(?P<cue>{CUE})[ -](?:the )?)?(?P<x>(?:(?P<mod>{MOD}) )?"
    rf"(?P<s>spring|summer|fall|autumn|winter)\b(?:(?: of|,)? (?P<y>{YEAR}))?)",
    F,
)
# Words after a lower-case "may"/"march"/"august" that mark it as a verb or
# adjective rather than a month.
RE_NOT_MONTH_NEXT = re.compile(
    r" (?:be|been|have|had|not|also|well|never|still|just|only|even|seem|need"
    r"|want|take|make|help|come|go|get|company|forward|along|past)\b",
    F,
)
RE_RANGE_PRE = re.compile(r"\b(?:between|from) (?:the )?$", F)
RE_RANGE_GAP = re.compile(r" ?(?P<c>and|to|until|till|through|thru|-|\u2013|\u2014) ?(?:the )?", F)
RE_OPEN = re.compile(
    r"\b(?P<op>before|after|since|until|till|prior to|earlier than|later than) $",
    F,
)
RE_DIGIT = re.compile(r"[0-9]")
# Every rule above needs a digit or one of these words: text without any has no time
# expression, and is passed over with one scan instead of one per rule.
RE_TRIGGER = re.compile(
    rf"[0-9]|\b(?:{MONTH_ANY}|{WEEKDAY_ALT}|yesterday|today|tonight|tomorrow|night"
    r"|morning|afternoon|evening|days?|weeks?|weekends?|months?|years?"
    r"|spring|summer|fall|autumn|winter)\b",
    F,
)
RE_HAS_YEAR = re.compile(rf"(?<![0-9]){YEAR}")
RE_WS = re.compile(r"\s+")
