"""Changes found by meaning: a new memory that says something else about what an earlier
one said, in other words ("I'm renting a flat in Porto", then "we finally got the keys to
our place in Lisbon").

The fact reader (:mod:`slm.ingest.facts`) links updates it can name (subject, attribute,
value) but reads only wording like its patterns. This reader links by meaning, with the
structure of the two statements as the check, no model beyond the embedding slm already
computes:

- *meaning*: the cosine between the two memories' embeddings, plus a bonus when the newer
  one uses a word that announces a change ("moved", "switched", "no longer", "now");
- *who*: both are about the same subject (the speaker for "I", "my", "we"; a person named
  first; a relative of the speaker), so a sister's city never replaces the user's;
- *which attribute*: where the fact reader names an attribute in both, it is the same one
  (a degree is not replaced by an internship), and the values differ (the same value said
  again is not a change);
- *what*: both are statements that can give a value: not questions, not the assistant's
  words, not plans or conditionals ("thinking about moving to Berlin"), not documents or
  long messages (over :data:`MAX_CHARS` characters);
- *when*: the newer one starts later;
- *said how*: people state their own changes, so the two have the same speaker where
  both name one; and in a conversation (turns that open with their speaker's name) the
  newer turn must announce the change: similar turns without such a word are the
  conversation going on.

Each link carries its evidence as text ("meaning: cosine 0.74, cue 'moved', subject
user"), shown wherever a probable update is. The score a link needs (:data:`LINK_SCORE`)
was fitted on the project's development histories; :data:`SURE_SCORE` is where links are
precise enough to supersede automatically under the ``auto`` policy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from slm.embed import Matrix
from slm.ingest.entities import extract_entities
from slm.ingest.facts import RELATIVES, Fact, facts
from slm.ingest.roles import ASSISTANT, label, role_of
from slm.ingest.standing import sentences
from slm.models import NewMemory, to_micros
from slm.store import Store
from slm.store.base import MEANING as PREFIX

#: The cosine plus cue bonus a pair needs to be linked as a probable change...
LINK_SCORE = 0.60
#: ...and to be superseded automatically under the ``auto`` update policy.
SURE_SCORE = 0.70
#: What a word announcing a change adds to the cosine.
CUE_BONUS = 0.08
#: How many of a new memory's nearest memories are read as possible earlier versions.
CANDIDATES = 5
#: A longer memory is a document or a long message, not a statement of one fact: it is
#: neither linked nor linked to.
MAX_CHARS = 600

_CUE = re.compile(
    r"\b(?:moved|moving|relocated|relocating|switched|switching|changed|no longer|"
    r"not any ?more|any ?more|left|leaving|quit|replaced|instead|these days|traded|"
    r"upgraded|sold|closed|cancell?ed|dropped|ditched|gave up|giving up|broke up|retired|"
    r"transferred|took over|taken over|from now on|as of (?:today|now|this)|"
    r"(?:is|are|am|'s|'re|'m|lives?|works?|drives?|uses?|runs?|goes|go) now|now (?:is|are|"
    r"lives?|works?|drives?|uses?|runs?|goes|go|at|in|on|with|a|an|the|my|our))\b",
    re.IGNORECASE,
)
#: Plans, wishes and conditionals give no value yet.
_UNSETTLED = re.compile(
    r"\b(?:if|whether|might|maybe|perhaps|could|should|thinking (?:about|of)|plan(?:s|ning)? "
    r"to|hope|hoping|want to|wants to|would like|considering|dream(?:ing)? of|someday|"
    r"propos(?:ed|es|ing)|suggest(?:ed|s|ing)|apply(?:ing)? (?:to|for)|applied (?:to|for)|"
    r"interview(?:ed|ing)? (?:with|at|for)|looking (?:for|at|into))\b",
    re.IGNORECASE,
)
#: A name used to address someone ("Hey Mel!", "Thanks, Caroline."): kept out of who a
#: statement is about.
_VOCATIVE = re.compile(
    r"((?:^|[,.!?]\s+|\b(?:[Hh]ey|[Hh]i|[Hh]ello|[Tt]hanks|[Tt]hank you|[Ww]ow|[Yy]es|[Yy]eah|"
    r"[Yy]ep|[Ss]ure|[Cc]ongrats|[Oo]h|[Oo]k|[Oo]kay|[Gg]reat|[Nn]ice|[Cc]ool|[Dd]ear|[Tt]hing)"
    r"[,!]?\s+))[A-Z][a-z]+(?=\s*[,!?.]|\s*$)"
)
_NUMBER = re.compile(r"\d[\d,.:]*")
_FIRST = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|[Ww]e|[Ww]e're|[Ww]e've|[Mm]y|[Oo]ur|[Mm]e|[Uu]s)\b")
_RELATIVE = re.compile(
    rf"\W*(?:(?P<whose>[Mm]y|[Oo]ur)|(?P<name>[A-Z][\w-]+)'s) (?P<rel>{RELATIVES}|kids?|children|"
    r"family)\b(?: (?P<called>[A-Z][a-z]+)\b)?"
)
#: A word that follows a verb, not a name: "Traded in the Civic", "Joined Anytime Fitness".
_OBJECT = re.compile(
    r"\s+(?:(?:a|an|the|my|our|his|her|their|its|this|that|some|in|up|over|into|out|off|on|"
    r"to|with|for|me|us|him|them|it)\b|[A-Z])"
)


@dataclass(frozen=True, slots=True)
class Reading:
    """What the change reader needs of one memory."""

    #: who it may be about (:func:`_subject`), or None when it cannot give a value (a
    #: question, the assistant's words, a plan)
    subject: tuple[str, ...] | None
    facts: tuple[Fact, ...]
    cue: str | None
    #: when it starts to hold, in microseconds
    start: int
    names: frozenset[str] = frozenset()
    #: the speaker: who "I" is
    me: str = "user"
    #: whether it opens with a relative ("my sister ...", "Ana's son ...")
    relative: bool = False
    #: who said it, when its label or source says
    said_by: str | None = None
    #: a turn of a conversation (it opens with its speaker's name: "Ana: ...")
    turn: bool = False


def read(
    content: str, source: str | None, start: int, stated: Sequence[Fact] | None = None
) -> Reading:
    """Read one memory for change detection (``stated``: its facts, when already read)."""
    found = tuple(facts(content, source) if stated is None else stated)
    speaker, body = label(content)
    parts = sentences(body)
    if (
        len(content) > MAX_CHARS
        or role_of(content, source) == ASSISTANT
        or not parts
        or all(p.rstrip().endswith("?") for p in parts)
        or _UNSETTLED.search(body)
    ):
        return Reading(None, found, None, start)
    me = (speaker or source or "user").strip().casefold()[:80] or "user"
    body = _VOCATIVE.sub(r"\1", body)  # "Thanks, Mel!" names who is spoken to, not about
    parts = sentences(body) or parts
    cue = _CUE.search(body)
    subject = _subject(" ".join(parts[:2]), me)
    cue_word = cue.group(0).casefold() if cue else None
    relative = _RELATIVE.match(parts[0]) is not None and len(subject) == 1
    names = _names(body) - set(subject[:1])
    said_by = (speaker or source or "").strip().casefold() or None
    turn = speaker is not None
    return Reading(subject, found, cue_word, start, names, me, relative, said_by, turn)


def _subject(sentence: str, me: str) -> tuple[str, ...]:
    """Who the first sentence may be about, most likely first: a relative opening it ("my
    sister", "Ana's son Leo": Leo) alone; else the speaker when it speaks in the first
    person, and the people it names, in the order they come."""
    relative = _RELATIVE.match(sentence)
    if relative:
        whose = me if relative.group("whose") else relative.group("name").casefold()
        called = relative.group("called")
        return (called.casefold() if called else f"{whose}'s {relative.group('rel').casefold()}",)
    places: list[tuple[int, str]] = []
    first = _FIRST.search(sentence)
    if first:
        places.append((first.start(), me))
    for mention in extract_entities(sentence):
        at = sentence.find(mention.surface)
        if mention.speaker or at < 0 or mention.kind in ("place", "org"):
            continue
        if at == 0 and mention.kind != "person" and _OBJECT.match(sentence, len(mention.surface)):
            continue  # a verb opening a note, then its object: "Traded in the Civic"
        places.append((at, mention.key))
    return tuple(dict.fromkeys(who for _, who in sorted(places)))


def _names(text: str) -> frozenset[str]:
    """The values a text gives: the names inside its sentences (a capitalised word opening
    a sentence is as often a verb or a greeting as a name) and its numbers."""
    keys = {
        mention.key
        for sentence in sentences(text)
        for mention in extract_entities(sentence)
        if not mention.speaker and sentence.find(mention.surface) > 0
    }
    return frozenset(keys | set(_NUMBER.findall(text)))


def same_subject(newer: Reading, older: Reading) -> str | None:
    """Who both are about, or None when they are about different people: the first
    candidate of one that the other also has; when they share none, "unclear" where
    neither speaks in the first person nor opens with a relative (capitalised words
    opening a note are as often things as people: "Standup moved to 8:45")."""
    if newer.subject is None or older.subject is None:
        return None
    a, b = newer.subject, older.subject
    if not a or not b:
        if newer.relative or older.relative:
            return None
        return (a or b or ("unclear",))[0]  # one names no one: a note, the speaker's
    shared = [who for who in a if who in b]
    if shared:
        return shared[0]
    if newer.relative or older.relative or newer.me in a or older.me in b:
        return None  # someone else's, or the speaker's against someone named
    return "unclear"  # neither says who: "Standup is at 9:30", "Rent went up again"


def judge(newer: Reading, older: Reading, cosine: float) -> tuple[float, str] | None:
    """The score and evidence of ``newer`` changing what ``older`` said, or None."""
    subject = same_subject(newer, older)
    if subject is None or older.start >= newer.start:
        return None
    if newer.facts and older.facts:
        # The fact reader names both: another attribute, or the same one (which it links
        # itself, or which keeps its value).
        return None
    if newer.said_by and older.said_by and newer.said_by != older.said_by:
        return None  # people state their own changes: another speaker's words do not
    if newer.turn and not newer.cue:
        return None  # a turn like an earlier one is the conversation going on
    if not newer.cue and (not newer.names - older.names or newer.names & older.names):
        # With no word announcing a change, a change shows as a new value (a name or a
        # number) that is not the old value mentioned again.
        return None
    score = cosine + (CUE_BONUS if newer.cue else 0.0)
    if score < LINK_SCORE:
        return None
    evidence = f"{PREFIX}cosine {cosine:.2f}"
    if newer.cue:
        evidence += f", cue '{newer.cue}'"
    return score, f"{evidence}, subject {subject}"


#: The reading of a memory no pair needs.
_UNREAD = Reading(None, (), None, 0)


@dataclass(frozen=True, slots=True)
class Change:
    """A probable change found for a new memory: the earlier memory it changes (a stored
    key, or an index in the same batch), the evidence, and whether it is sure enough to
    supersede under the ``auto`` policy."""

    older: int
    in_batch: bool
    evidence: str
    sure: bool


def probable(
    store: Store,
    profile: str,
    items: Sequence[NewMemory],
    vectors: Matrix,
    nearest: Sequence[Sequence[tuple[int, float]]],
    stated: Sequence[Sequence[Fact]],
) -> list[tuple[tuple[int, bool, str, bool], ...]]:
    """The probable changes of each new memory (:func:`find`), read against its nearest
    stored memories and the rest of its batch, as ``NewMemory.changes`` holds them
    (``stated``: each item's facts). A memory that names what it supersedes is left as its
    caller said."""
    # Only pairs close enough to pass with a cue are read: most writes read nothing.
    reach = LINK_SCORE - CUE_BONUS
    near = [[(key, cos) for key, cos in found if cos >= reach] for found in nearest]
    within = _batch_candidates(vectors, reach)
    named = {j for found in within for j, _ in found}
    ask = [bool(n or w) or i in named for i, (n, w) in enumerate(zip(near, within, strict=True))]
    readings = [
        read(i.content, i.source, to_micros(i.valid_from or i.event_time), found)
        if wanted
        else _UNREAD
        for i, found, wanted in zip(items, stated, ask, strict=True)
    ]
    records = store.get_by_keys(profile, {key for found in near for key, _ in found})
    stored = {k: read(r.content, r.source, to_micros(r.starts)) for k, r in records.items()}
    replaced: dict[tuple[bool, int], int] = {}
    for update in store.versions.updates(profile, list(records)):
        if update.older in records:
            at = to_micros(update.newer_from)
            replaced[(False, update.older)] = min(at, replaced.get((False, update.older), at))
    found = find(readings, near, within, stored, replaced)
    return [
        () if item.supersedes else tuple((c.older, c.in_batch, c.evidence, c.sure) for c in f)
        for item, f in zip(items, found, strict=True)
    ]


def find(
    fresh: Sequence[Reading],
    stored: Sequence[Sequence[tuple[int, float]]],
    within: Sequence[Sequence[tuple[int, float]]],
    stored_readings: dict[int, Reading],
    replaced: dict[tuple[bool, int], int] | None = None,
) -> list[tuple[Change, ...]]:
    """For each new memory, the earlier memory it most probably changes: at most one, the
    best scored among those that still held when it started (a memory already replaced
    by then is changed through its replacement, so a chain of values links each to the
    one before it).

    ``stored``: each new memory's nearest stored memories (key, cosine); ``within``: its
    nearest in the batch (index, cosine);
    ``stored_readings``: their readings, by key; ``replaced``: (in batch?, key or index)
    of memories known to be replaced, and from when (microseconds). The batch is read in
    time order, each link it makes counting for the memories after it.
    """
    replaced = dict(replaced or {})
    out: list[tuple[Change, ...]] = [() for _ in fresh]
    for i in sorted(range(len(fresh)), key=lambda i: (fresh[i].start, i)):
        reading = fresh[i]
        best: tuple[float, int, Change] | None = None  # (score, older start, change)
        options: list[tuple[Reading, float, int, bool]] = [
            (stored_readings[key], cos, key, False)
            for key, cos in stored[i]
            if key in stored_readings
        ]
        options += [(fresh[j], cos, j, True) for j, cos in within[i]]
        for older, cosine, ref, in_batch in options:
            if replaced.get((in_batch, ref), reading.start + 1) <= reading.start:
                continue
            judged = judge(reading, older, cosine)
            if judged is None:
                continue
            score, evidence = judged
            change = Change(ref, in_batch, evidence, score >= SURE_SCORE)
            if best is None or (score, older.start) > best[:2]:
                best = (score, older.start, change)
        if best is not None:
            out[i] = (best[2],)
            key = (best[2].in_batch, best[2].older)
            replaced[key] = min(reading.start, replaced.get(key, reading.start))
    return out


def _batch_candidates(
    vectors: Matrix, floor: float, block: int = 512
) -> list[list[tuple[int, float]]]:
    """Each item's nearest other items of the batch (in either order) at least ``floor``
    similar, with cosines."""
    n = len(vectors)
    out: list[list[tuple[int, float]]] = []
    for start in range(0, n, block):
        rows = vectors[start : start + block]
        sims = rows @ vectors.T
        sims[np.arange(len(rows)), np.arange(start, start + len(rows))] = -np.inf
        take = min(CANDIDATES, n - 1)
        if take <= 0:
            out += [[] for _ in range(len(rows))]
            continue
        top = np.argpartition(-sims, take - 1, axis=1)[:, :take]
        for row, cols in enumerate(top):
            out.append([(int(c), float(sims[row, c])) for c in cols if sims[row, c] >= floor])
    return out
