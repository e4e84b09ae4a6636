"""Zero-LLM named-entity extraction for short memory texts (chat turns, notes, facts).

Deterministic, pure Python plus ``re``, linear in the length of the text. The same
normalisation (:func:`entity_key`) serves memories and queries so their entities match.

* Speaker: a text starting with 1-3 capitalised words, ``:`` and whitespace (``"Caroline: hi"``)
  yields a ``person`` mention with ``speaker=True``; labels such as ``User``, ``Assistant``,
  ``Note`` or ``Re`` are not speakers. The rest of the text is scanned normally.
* Candidates: capitalised words (``José``, ``O'Brien``), acronyms of 2+ capitals (``NASA``,
  ``COVID-19``) and words with internal capitals (``iPhone``). Adjacent candidates with no
  punctuation between them form one mention (``Golden Gate Bridge``, ``Dr. Smith``); lower-case
  particles may join them (``University of California``, ``Lord of the Rings``). Runs of more
  than six words are taken for title-cased prose and dropped.
* Never entities: pronouns, determiners, question words, auxiliaries, conjunctions, prepositions,
  greetings and interjections (``I``, ``It``, ``What``, ``Hey``, ``Thanks``...), month and weekday
  names (the time module owns dates; ``May`` is always a month), numbers, words over 64
  characters, words glued to URL or handle punctuation, lone letters and lone honorifics.
* A sentence-initial capitalised word also must not be a common English word (``Great``,
  ``Honestly``...), an ``-ing`` form, or a word seen in lower case elsewhere in the text.
* Acronyms are ignored in shouted (mostly upper-case) text; chat abbreviations (``LOL``,
  ``FYI``) and all-caps common words (``WOW``, ``OK``) never count.
* Possessives (``Caroline's``, ``James'``) and contractions (``Caroline'll``) are stripped and
  end the mention; negations (``Don't``) are not names.

``kind``, first rule that fires: ``person`` for the speaker or a run opened by an honorific (Mr,
Mrs, Ms, Mx, Dr, Prof, Miss, Sir); ``org`` for a run of acronyms or one containing Inc, Corp,
University, College, School, Company, Club, Group, Association, Center/Centre, Foundation,
Bank...; ``place`` for a run containing City, Street, Park, Lake, Beach, Mountain, River,
Island... or preceded (optionally via ``the``) by in, at, from, near, visit(ed), or by ``to``
after a motion word (``went to Paris``, but not ``talked to Melanie``); ``person`` for a single
word followed by a speech or feeling verb (``Melanie said``); else ``other``. Repeated keys keep
the first surface and the strongest kind (person > org > place > other).

Limitation: only capitalisation marks a name, so all lower-case text, common in typed questions
(``"what did melanie paint?"``), yields no entities; callers should fall back to lexical matching.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "Mention",
    "entity_key",
    "extract_entities",
    "query_entities",
    "resolve_aliases",
    "without_names",
]

MAX_KEY_LEN = 64
_MAX_RUN = 6


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Never part of a name, wherever they appear.
_FUNCTION = _words("""
    i me my mine myself you your yours yourself yourselves he him his himself she her hers herself
    it its itself we us our ours ourselves they them their theirs themselves a an the this that
    these those some any each every all both either neither no none another such what when where
    who whom whose why how which whatever whenever wherever whoever is am are was were be been
    being do does did done doing have has had having can could will would shall should might must
    and or but nor so yet if then than because since though although while after before once until
    unless as not never always here there now today yesterday tomorrow tonight yes yeah yep yup
    nope nah ok okay oh ah aw aww wow whoa hey hi hello bye goodbye congrats congratulations cheers
    sorry please lol haha hmm um uh omg btw thanks thank in on at to from for with without about of
    by into onto over under during through between against also too very just
""")
# Common words that are capitalised only because they start a sentence.
_COMMON = _FUNCTION | _words("""
    other others many much more most few several one two three four five six seven eight nine ten
    first second third last next let get gets got go goes went gone going gonna wanna gotta make
    made take took give gave keep kept try tried tell told say said see saw seen look looking know
    knew think thought feel felt find found come came want need love loved like liked hope wish
    miss guess mean remember enjoy check sometimes often usually still even only quite really
    actually maybe perhaps probably definitely absolutely totally certainly honestly seriously
    basically literally apparently hopefully luckily unfortunately fortunately finally recently
    eventually currently lately suddenly sadly thankfully anyway anyways however besides plus later
    soon again already well sure great good nice awesome cool amazing wonderful beautiful lovely
    glad happy fun exactly indeed agreed up down out off near morning afternoon evening night
    weekend week month year day time mom dad mum mother father grandma grandpa dear wait listen
    speaking user assistant system note update reminder todo summary question answer anyone someone
    everyone nobody something nothing everything life family friends work
""")
_CALENDAR = _words("""
    january february march april may june july august september october november december monday
    tuesday wednesday thursday friday saturday sunday feb apr aug sep sept oct nov dec tue tues wed
    thu thur thurs fri
""")
_ACRONYM_STOP = _words("""
    fyi asap tbh imo imho idk aka etc vs ps pps thx ty np brb irl smh nvm ikr lmao rofl diy tl dr
    afaik iirc
""")
_ACRONYM_KEEP = _words("us who")
_NOT_SPEAKERS = _COMMON | _CALENDAR | _ACRONYM_STOP | _words("bot ai human re fwd subject date")
_HONORIFICS = _words("mr mrs ms mx dr prof miss sir")
_ABBREVIATIONS = _HONORIFICS | _words("st mt ft jr sr inc corp ltd co ave rd blvd")
_CONNECTORS = _words("of de du da del della di van von der den la le")
_ORG_WORDS = _words("""
    inc corp corporation ltd llc company co university college school academy institute club group
    association center centre foundation bank society hospital church agency
""")
_PLACE_WORDS = _words("""
    city street st avenue ave road rd boulevard blvd lane park lake beach mountain mountains mount
    mt river island islands bay valley canyon county bridge square harbor harbour falls forest
    desert coast ocean sea village town airport station trail peak hill hills
""")
_PLACE_PREPS = _words("in at from near visit visited visiting visits")
_MOTION = _words("""
    go goes going went gone move moves moved moving travel travels traveled travelled traveling
    travelling trip flew fly flies flying drove drive drives driving head headed heading come comes
    came coming return returned returning back relocated relocating got way vacation
""")
_NOT_FIRST_NAMES = _words("new san santa los las el le la st saint fort port north south east west")
_PERSON_VERBS = _words("""
    said says told tells asked asks replied replies wrote writes thinks thought feels felt smiled
    laughed loves loved
""")
_CONTRACTIONS = _words("t m ve ll d re")
_TRAILING = "'\u2019.&-"
_SENTENCE_END = frozenset(".!?\n\u2026")
_GLUE = frozenset("/@#\\:=~^|<>")
_RANK = {"other": 0, "place": 1, "org": 2, "person": 3}
_WORD = re.compile(r"\w[\w'\u2019.&-]*")
# Bounded repetition and disjoint character classes keep this linear.
_SPEAKER = re.compile(r"\s*([^\W\d_][\w'\u2019.-]*(?:[ \t]+[^\W\d_][\w'\u2019.-]*){0,2}):(?=\s|$)")


@dataclass(frozen=True, slots=True)
class Mention:
    """One entity found in a text; ``key`` is what graphs and queries match on."""

    surface: str
    key: str
    kind: str
    speaker: bool


class _Tok(NamedTuple):
    text: str  # the word with possessive, contraction and trailing punctuation removed
    start: int
    fold: str
    shape: str  # "cap", "acronym", "inner" or "" (not name-like)
    sent_start: bool
    brk_before: bool
    brk_after: bool
    glued: bool  # touches URL or handle punctuation (computed for words that can be names)


def _is_word_char(c: str) -> bool:
    # Combining marks end many Indic and Hebrew words; they are part of the name.
    return c.isalnum() or unicodedata.category(c).startswith("M")


def _trim(s: str) -> str:
    i, j = 0, len(s)
    while i < j and not _is_word_char(s[i]):
        i += 1
    while j > i and not _is_word_char(s[j - 1]):
        j -= 1
    return s[i:j]


def _normalise(name: str) -> str:
    s = unicodedata.normalize("NFKC", name).replace("\u2019", "'").casefold()
    s = _trim(" ".join(s.split()).replace(". ", " "))
    if s.endswith("'s"):
        s = _trim(s[:-2])
    return s


def entity_key(name: str) -> str:
    """Normalised key: NFKC, casefolded, whitespace collapsed, possessive and edge punctuation
    stripped, at most ``MAX_KEY_LEN`` characters. May be empty for input with no letters."""
    return _trim(_normalise(name)[:MAX_KEY_LEN])


def _shape(core: str) -> str:
    if len(core) > MAX_KEY_LEN or core.islower():
        return ""
    letters = [c for c in core if c.isalpha()]
    if not letters:
        return ""
    if len(letters) >= 2 and all(c.isupper() for c in letters):
        return "acronym"
    if core[0].isupper():
        return "cap"
    return "inner" if any(c.isupper() for c in core[1:]) else ""


def _split_word(raw: str) -> tuple[str, bool, bool, bool]:
    """(core, name_like_allowed, ends_sentence, breaks_after) for one matched word."""
    core = raw.rstrip(_TRAILING)
    tail = raw[len(core) :]
    abbrev = core.casefold() in _ABBREVIATIONS or (len(core) == 1 and core.isupper())
    ends = "." in tail and not abbrev
    breaks = bool(tail) and not (tail == "." and abbrev)
    if len(core) > 2 and core[-2] in "'\u2019" and core[-1] in "sS":
        return core[:-2], True, ends, True
    cut = max(core.rfind("'"), core.rfind("\u2019"))
    if cut > 0 and core[cut + 1 :].casefold() in _CONTRACTIONS:
        return core[:cut], core[cut + 1 :].casefold() != "t", ends, True
    return core, True, ends, breaks


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    prev_end, pending_sentence, pending_break = 0, True, True
    for m in _WORD.finditer(text):
        start, end = m.span()
        gap = text[prev_end:start]
        prev_end = end
        raw = m.group()
        sent_start = pending_sentence or not _SENTENCE_END.isdisjoint(gap)
        brk_before = sent_start or pending_break or bool(gap.strip())
        if raw.isalpha() and raw.islower():
            # Most words: nothing to split off, never name-like (``_split_word`` and
            # ``_shape`` would return exactly this).
            tok = _Tok(raw, start, raw.casefold(), "", sent_start, brk_before, False, False)
            pending_sentence = pending_break = False
            toks.append(tok)
            continue
        core, allowed, ends, breaks = _split_word(raw)
        after = text[end : end + 2]
        glued = gap[-1:] in _GLUE or (after[:1] in _GLUE and not after[1:].isspace())
        shape = _shape(core) if allowed else ""
        tok = _Tok(core, start, core.casefold(), shape, sent_start, brk_before, breaks, glued)
        toks.append(tok)
        pending_sentence, pending_break = ends, False
    return toks


class _Scan:
    """One text's tokens plus the context the candidate rules need."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokenize(text)
        caps = sum(1 for t in self.toks if t.shape == "acronym")
        self.shouting = caps >= 3 and caps * 2 > sum(1 for t in self.toks if t.text[0].isalpha())
        self.lower_seen = {t.fold for t in self.toks if t.text[0].islower()}

    def cand(self, i: int) -> bool:
        t = self.toks[i]
        if not t.shape or t.glued or t.fold in _CALENDAR:
            return False
        if t.shape == "acronym":
            common = t.fold in _COMMON and t.fold not in _ACRONYM_KEEP
            return not (self.shouting or common or t.fold in _ACRONYM_STOP)
        return t.fold not in (_COMMON if t.sent_start else _FUNCTION)

    def joined(self, i: int) -> bool:
        if not 0 < i < len(self.toks):
            return False
        return not (self.toks[i].brk_before or self.toks[i - 1].brk_after)

    def _connectors_end(self, j: int) -> int:
        """Index of the candidate after 1-2 name particles starting at ``j``, else -1."""
        k = j
        while k - j < 2 and self.joined(k) and self.toks[k].text.islower():
            fold = self.toks[k].fold
            after_of = k > j and self.toks[k - 1].fold == "of"
            if not (fold in _CONNECTORS or (fold == "the" and after_of)):
                break
            k += 1
        return k if k > j and self.joined(k) and self.cand(k) else -1

    def runs(self) -> Iterator[list[int]]:
        i, n = 0, len(self.toks)
        while i < n:
            if not self.cand(i):
                i += 1
                continue
            run, j = [i], i + 1
            while j < n:
                if self.joined(j) and self.cand(j):
                    run.append(j)
                    j += 1
                    continue
                k = self._connectors_end(j)
                if k < 0:
                    break
                run.extend(range(j, k + 1))
                j = k + 1
            i = j
            run = self._peel(run)
            if run and len(run) <= _MAX_RUN and self._meaningful(run):
                yield run

    def _peel(self, run: list[int]) -> list[int]:
        # A capitalised first word may just be sentence case: "Visiting New York ...".
        first = self.toks[run[0]]
        casual = first.fold in self.lower_seen or (
            len(first.fold) >= 5 and first.fold[-3:] == "ing"
        )
        if first.sent_start and first.shape != "acronym" and casual:
            run = run[1:]
            while run and not self.cand(run[0]):
                run = run[1:]
        return run

    def _meaningful(self, run: list[int]) -> bool:
        lone_letter = len(run) == 1 and len(self.toks[run[0]].text) == 1
        return not lone_letter and not all(self.toks[i].fold in _HONORIFICS for i in run)

    def surface(self, run: list[int]) -> str:
        last = self.toks[run[-1]]
        return self.text[self.toks[run[0]].start : last.start + len(last.text)]

    def kind(self, run: list[int]) -> str:
        folds = [self.toks[i].fold for i in run]
        if folds[0] in _HONORIFICS:
            return "person"
        if all(self.toks[i].shape == "acronym" for i in run) or not _ORG_WORDS.isdisjoint(folds):
            return "org"
        if not _PLACE_WORDS.isdisjoint(folds) or self._after_place_prep(run[0]):
            return "place"
        nxt = run[-1] + 1
        if len(run) == 1 and self.joined(nxt) and self.toks[nxt].fold in _PERSON_VERBS:
            return "person"
        return "other"

    def _after_place_prep(self, s: int) -> bool:
        p = s - 1
        if self.joined(s) and self.toks[p].fold == "the":
            p -= 1
        if not self.joined(p + 1):
            return False
        if self.toks[p].fold == "to":
            return self.joined(p) and self.toks[p - 1].fold in _MOTION
        return self.toks[p].fold in _PLACE_PREPS


def _speaker(text: str) -> tuple[Mention | None, str]:
    m = _SPEAKER.match(text)
    if m is None:
        return None, text
    name, key = m.group(1), _normalise(m.group(1))
    if not 2 <= len(key) <= MAX_KEY_LEN or any(
        not w[0].isupper() or w.rstrip(".").casefold() in _NOT_SPEAKERS for w in name.split()
    ):
        return None, text
    return Mention(name, key, "person", True), text[m.end() :]


def _add(found: dict[str, Mention], mention: Mention) -> None:
    old = found.get(mention.key)
    if old is None:
        found[mention.key] = mention
    elif _RANK[mention.kind] > _RANK[old.kind]:
        found[mention.key] = Mention(old.surface, old.key, mention.kind, old.speaker)


def extract_entities(text: str) -> list[Mention]:
    """Entities of ``text``, deduplicated by key, in order of first appearance (speaker first)."""
    found: dict[str, Mention] = {}
    speaker, body = _speaker(text)
    if speaker is not None:
        _add(found, speaker)
    scan = _Scan(body)
    for run in scan.runs():
        surface = scan.surface(run)
        key = _normalise(surface)
        if key and len(key) <= MAX_KEY_LEN:
            _add(found, Mention(surface, key, scan.kind(run), False))
    return list(found.values())


def query_entities(text: str) -> list[str]:
    """Entity keys of a question, in order. Lower-case names are not found (see module doc)."""
    return [m.key for m in extract_entities(text)]


def without_names(text: str, surfaces: Iterable[str]) -> str:
    """``text`` with every whole-word occurrence of the given names (and a possessive right
    after one) taken out and spaces collapsed; ``text`` itself when nothing would be left."""
    out = text
    for surface in sorted(set(surfaces), key=len, reverse=True):
        if surface.strip():
            out = re.sub(rf"(?<!\w){re.escape(surface)}(?:['\u2019]s)?(?!\w)", " ", out)
    out = " ".join(out.split())
    return out if any(c.isalnum() for c in out) else text


def _first_name(key: str) -> str | None:
    """First name of a key that looks like a person's full name, else None."""
    tokens = key.split()
    if tokens and tokens[0].rstrip(".") in _HONORIFICS:
        tokens = tokens[1:]
    if not 2 <= len(tokens) <= 4:
        return None
    if tokens[0] in _NOT_FIRST_NAMES or any(
        t in _ORG_WORDS
        or t in _PLACE_WORDS
        or t in _CONNECTORS
        or not t.replace("-", "").replace("'", "").replace(".", "").isalpha()
        for t in tokens
    ):
        return None
    return tokens[0]


def resolve_aliases(keys: Iterable[str]) -> dict[str, str]:
    """Map every key to its canonical key. A one-word key that is the first name of exactly one
    person-like multi-word key maps to it ("john" -> "john smith"); anything else maps to itself.
    """
    unique = list(dict.fromkeys(keys))
    owners: dict[str, set[str]] = {}
    for key in unique:
        first = _first_name(key)
        if first is not None:
            owners.setdefault(first, set()).add(key)
    aliases = {key: key for key in unique}
    for key in unique:
        full = owners.get(key, set())
        if " " not in key and len(full) == 1:
            aliases[key] = next(iter(full))
    return aliases
