"""Facts that can change: who a memory is about, which attribute it gives and its value.

A memory that says "I moved to Lisbon" gives a new value (Lisbon) for the speaker's
residence. When a later memory gives another value for the same subject and attribute,
the older one has probably stopped being true: that is how slm finds updates without an
LLM (``slm.store.lifecycle`` links them). Only *single-valued* attributes count, the
ones where a new value replaces the old one: where someone lives, where and as what they
work, a favourite thing, the car they drive, an amount (rent, salary, weight, budget), a
date that moves (a deadline, an appointment), diet and relationship status, a preference
between kinds of one thing ("aisle seats" after "window seats"), and "my X is Y" for an
X in :data:`SINGLE_VALUED`. Saying "I like hiking" and later "I like jazz" is not an
update and is never linked.

The subject is the speaker for the first person ("I", "my", "we": the ``Name:`` label a
turn opens with, else its source, else the store's user), a person named at the start of
the clause ("Jordan works at ..."), or a relative of the speaker ("my sister lives in
...", keyed by the speaker and the relation). What the assistant side of a conversation
says is never read as a fact about the user. Questions, negations ("I don't live there
any more") and conditionals are skipped: they give no value.

A question asks about the present unless it says otherwise ("did", "used to", "before",
a past year): :func:`asks_about_past`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slm.ingest import timewords as words
from slm.ingest.roles import ASSISTANT, label, role_of
from slm.ingest.standing import sentences

#: At most this many facts are kept per memory (the first ones).
MAX_FACTS = 8
#: Values longer than this many words are cut (a value is a name, a place or an amount).
VALUE_WORDS = 4

#: Attributes stated as "my X is Y" that hold one value at a time.
SINGLE_VALUED = frozenset(
    """address email phone laptop car bike rent salary income budget weight height age
    deadline birthday doctor dentist therapist manager boss landlord team school major
    university title role position employer company job office commute timezone diet
    password username handle pronouns partner girlfriend boyfriend wife husband
    flight appointment mortgage occupation profession""".split()
)
#: Attributes said in other words, and the name their slots use.
ALIASES = {
    "address": "residence",
    "company": "employer",
    "job": "job title",
    "title": "job title",
    "role": "job title",
    "position": "job title",
    "occupation": "job title",
    "profession": "job title",
    "salary": "income",
    "pay": "income",
}

_NOT_NAMES = frozenset(
    """The This That These Those There Then When What Where Who Why How Yes No Oh Well So
    And But Also Just Now Today Yesterday It He She They You Your Our My His Her Their
    Since After Before Last Next Maybe Please Thanks Thank Hi Hey Sure Okay Ok Wow Great
    Good Nice Still Actually Honestly Anyway Finally Recently Officially Tonight Tomorrow
    Lately Currently Luckily Sadly Unfortunately Fortunately Basically Meanwhile Started
    Moved Joined Settled Big News Update Note Reminder""".split()
)
_FIRST = r"(?:I|i|We|we)"
#: A person's name: capitalised words that are not sentence openers (:data:`_NOT_NAMES`).
NAME_PATTERN = (
    rf"(?!(?:{'|'.join(sorted(_NOT_NAMES))})\b)"
    r"[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?(?: [A-Z][a-z]+)?"
)
#: The people a speaker names by relation ("my sister"): a fact about them is keyed by the
#: speaker and the relation.
RELATIVES = (
    r"sister|brother|mom|mum|mother|dad|father|wife|husband|partner|son|daughter|girlfriend|"
    r"boyfriend|parents|grandma|grandmother|grandpa|grandfather|aunt|uncle|cousin|roommate|"
    r"flatmate|best friend|friend|boss|manager"
)
_RELATIVE = rf"(?:[Mm]y|[Oo]ur) (?P<rel>{RELATIVES})"
_SUBJECT = rf"(?P<subj>{_RELATIVE}|{_FIRST}|{NAME_PATTERN})"
_ADVERBS = r"(?:(?:now|currently|still|just|recently|finally|officially|also|actually) )*"
#: Auxiliaries between a subject and its verb: "I'm", "we've been", "Ana has".
_AUX = r"(?:'m|'re|'s|'ve|'d|'ll| am| are| is| was| were| have| has| had| been| will| would)*"
#: A first verb phrase coordinated with the one that states the fact: "I packed up and
#: now call Porto home".
_GAP = r"(?:(?:[a-z']+ ){1,4}?and )?"


def _frame(verbs: str) -> str:
    """A subject (or none, at the start of a note: "Moved to Porto") and then ``verbs``."""
    lead = r"(?:(?:[Jj]ust|[Ff]inally|[Rr]ecently|[Oo]fficially|[Tt]oday|[Ss]o|[Nn]ow) )*"
    return (
        rf"(?:\b{_SUBJECT}{_AUX} {_ADVERBS}{_GAP}{_ADVERBS}|^(?P<implicit>){lead})"
        rf"(?i:{verbs})"
    )


_POSSESSOR = rf"(?:(?P<poss>{NAME_PATTERN})'s|(?P<my>[Mm]y|[Oo]ur))"
_VALUE = r"(?P<val>[^,.;!?\n]+)"
_CAR_MAKES = (
    r"Toyota|Honda|Volkswagen|VW|Tesla|Skoda|Ford|Renault|Mazda|Volvo|Kia|BMW|Audi|Mercedes|"
    r"Peugeot|Citroen|Citroën|Fiat|Nissan|Hyundai|Subaru|Chevrolet|Chevy|Jeep|Porsche|Opel|"
    r"Seat|Dacia|Lexus|Mini|Suzuki|Mitsubishi|Polestar|Rivian|Jaguar|Land Rover|Alfa Romeo"
)

#: (attribute, pattern): each pattern names the subject (``subj``, ``poss`` or ``rel``; a
#: bare "my" or a note without one is the speaker) and the value (``val``). Patterns are
#: matched inside one sentence.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (attribute, re.compile(pattern))
    for attribute, pattern in (
        (
            "residence",
            _frame(
                r"live|lives|lived|living|moved|moving|relocated|relocating|settled|based|"
                r"staying|resides|reside"
            )
            + r" (?i:back |over |out |away |down )?(?i:in|to|into|at) "
            r"(?:the (?i:city|town|village) of )?" + _VALUE,
        ),
        (
            "residence",
            _frame(r"call|calls|called") + r" (?P<val>[^,.;!?\n]+?) (?i:home)\b",
        ),
        (
            "residence",
            rf"\b(?:{_POSSESSOR}) (?i:new )?(?i:home|flat|apartment|house|place|address) "
            r"(?i:is|is now) (?i:in|at|on) " + _VALUE,
        ),
        (
            "residence",
            rf"\b(?i:home) (?i:for) (?:(?i:me|us)|(?P<subj>{NAME_PATTERN})) (?i:is|is now) "
            + _VALUE,
        ),
        (
            "employer",
            _frame(
                r"work|works|worked|working|employed|hired|started|starting|joined|joining|"
                r"join|interning"
            )
            + r" (?i:full[- ]time |part[- ]time |remotely )?"
            r"(?i:at|for|by|with)? ?(?P<val>[A-Z][^,.;!?\n]+)",
        ),
        (
            "employer",
            _frame(r"got|took|accepted|landed|received|started|have|has|began")
            + r" (?i:a|an|the|my|his|her|their) (?i:new )?(?i:job|position|role|offer) "
            r"(?i:at|with|from) " + _VALUE,
        ),
        (
            "job title",
            _frame(
                r"(?:work|works|worked|working|employed|hired|started|starting) as|"
                r"(?:got |been )?promoted to"
            )
            + r" (?i:a |an |the )?"
            + _VALUE,
        ),
        (
            "job title",
            rf"\b(?:{_POSSESSOR} )?(?i:new) (?i:role|title|position|job title)"
            rf"(?: (?i:for) (?:(?i:me|us)|(?P<subj>{NAME_PATTERN})))?(?: is|:) " + _VALUE,
        ),
        (
            "favourite",
            rf"\b{_POSSESSOR} (?i:new |current |all-time |absolute )?(?i:favou?rite) "
            r"(?P<what>[a-z]+(?: [a-z]+)?) "
            r"(?i:is|are|has become|these days is|right now is|is now)(?: now)? " + _VALUE,
        ),
        (
            "favourite",
            r"\b(?P<val>[A-Za-z][^,.;!?\n]{0,40}?) (?i:is|are) (?i:now )?"
            rf"{_POSSESSOR} (?i:new |current )?(?i:favou?rite) (?P<what>[a-z]+(?: [a-z]+)?)",
        ),
        (
            "car",
            _frame(r"drive|drives|driving|own|owns")
            + rf" (?i:a|an) (?i:new |used |second-hand )?(?P<val>(?:{_CAR_MAKES})\b[^,.;!?\n]*)",
        ),
        (
            "car",
            _frame(
                r"bought|buy|got|leased|picked up|traded (?:in )?(?:the|my|his|her|their) "
                r"(?:old )?car for"
            )
            + r" (?i:a|an|my|his|her|their) (?i:new |used |second-hand )?"
            rf"(?P<val>(?:{_CAR_MAKES})\b[^,.;!?\n]*)",
        ),
        (
            "diet",
            _frame(r"gone|become|became|went|turned|am|is|are|'m|'s|'re|eat|eats")
            + r" (?i:a |an |fully |strictly )*"
            r"(?P<val>(?i:vegetarian|vegan|pescatarian|keto|paleo|gluten[- ]free|"
            r"lactose[- ]free|dairy[- ]free|omnivore|carnivore))\b",
        ),
        (
            "diet",
            rf"\b{_SUBJECT}{_AUX} {_ADVERBS}"
            r"(?P<val>(?i:vegetarian|vegan|pescatarian|keto|paleo|omnivore))\b",
        ),
        (
            "diet",
            _frame(r"switched to|started|moved to|adopted|follow|follows")
            + r" (?i:a |an )?(?P<val>[a-z-]+) (?i:diet)\b",
        ),
        (
            "relationship",
            rf"\b{_SUBJECT}{_AUX} {_ADVERBS}(?:got )?"
            r"(?P<val>(?i:single|married|engaged|divorced|separated|widowed))\b",
        ),
        (
            "amount",
            rf"\b{_POSSESSOR} (?i:monthly |annual |yearly |new |current )?"
            r"(?P<what>rent|salary|income|budget|weight|mortgage|pay)"
            r" (?i:is|is now|went up to|went down to|rose to|dropped to|increased to|"
            r"decreased to|was raised to|was cut to|has gone up to|has dropped to|will be)"
            r" (?P<val>[^;!?\n]*\d[^;!?\n]*)",
        ),
        (
            "amount",
            _frame(r"earn|earns|make|makes") + r" (?P<val>[$€£]?\d[^;!?\n]*)(?P<what>)",
        ),
        (
            "rent",
            _frame(r"pay|pays|paying")
            + r" (?P<val>[$€£]?\d[\d,.]*(?:\s?(?:k|euros?|dollars?|pounds?))?)"
            r" (?:(?i:a|per) (?i:month)|(?:(?i:in|of|for) )?(?i:rent))\b",
        ),
        (
            "moved date",
            r"\b(?P<my>[Mm]y|[Oo]ur|[Tt]he) (?P<what>[a-z]+(?: (?!(?:has|was|got|is)\b)[a-z]+)?) "
            r"(?i:has been |was |"
            r"got |is )?(?i:moved|rescheduled|pushed|postponed|brought forward|changed|"
            r"shifted) (?i:back |up )?(?i:to) (?P<val>[^,;!?\n]+)",
        ),
        (
            "preference",
            rf"\b{_SUBJECT}{_AUX} {_ADVERBS}(?i:prefer|prefers|rather have) "
            r"(?P<val>[a-z][a-z -]*?) (?P<what>[a-z]+s)\b",
        ),
        (
            "preference",
            rf"^(?i:book|get|reserve) (?:(?i:me|us)|(?P<subj>{NAME_PATTERN})) "
            r"(?P<val>[a-z][a-z-]*) (?P<what>seats|rooms|tables|cabins)\b",
        ),
        (
            "possessive",
            rf"\b{_POSSESSOR} (?i:new |current )?"
            r"(?P<what>[a-z]+(?: [a-z]+)?) (?i:is|is now|has changed to|changed to) "
            r"(?P<val>[^,;!?\n]+)",
        ),
    )
)

_NEGATION = re.compile(
    r"\b(?:not|never|no longer|don't|doesn't|didn't|won't|wouldn't|can't|cannot|isn't|aren't|"
    r"wasn't|haven't|hasn't|if|whether|might|maybe|could|should|thinking about|plan(?:s|ning)? "
    r"to|hope|hoping|want to|wants to|would like|considering|dream)\b",
    re.IGNORECASE,
)
_VALUE_END = re.compile(
    r"\s+(?:and|but|because|since|so|which|where|who|with|at|after|before|when|while|last|"
    rf"this|next|for|from|until|as|on|in (?:19|20)\d\d|in (?:{words.MONTH_FULL})|a few|about|"
    r"two|three|four|five|six|several|months?|years?|weeks?|ago|now|today|yesterday)\b.*$",
    re.IGNORECASE,
)
_AMOUNTS = frozenset({"rent", "income", "budget", "weight", "mortgage"})
_AMOUNT = re.compile(r"[$€£]?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|%|kg|lbs?|pounds|euros?|dollars?))?")
_ARTICLE = re.compile(r"^(?:the|a|an|my|our|his|her|their|some|new)\s+", re.IGNORECASE)
_WORD = re.compile(r"[\w$€£%.'-]+")
RELATION_SUBJECTS = {"mum": "mother", "mom": "mother", "dad": "father", "grandma": "grandmother"}

#: Words that make a question ask about an earlier state ("Where did Ana live before?").
_PAST = re.compile(
    r"\b(?:did|was|were|had|used to|before|previous(?:ly)?|originally|formerly|former|old|"
    r"earlier|first|back (?:in|then|when)|at the time|ago|(?:in|during|until|by) (?:19|20)\d\d|"
    rf"in (?:{words.MONTH_FULL}))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Fact:
    """One value a memory gives: ``slot`` is ``subject|attribute`` (lower case)."""

    subject: str
    attribute: str
    value: str

    @property
    def slot(self) -> str:
        return f"{self.subject}|{self.attribute}"


def facts(content: str, source: str | None = None) -> list[Fact]:
    """The single-valued facts ``content`` states, in text order (at most one per slot)."""
    if role_of(content, source) == ASSISTANT:
        return []
    speaker, body = label(content)
    if speaker is not None and not _names_someone(speaker):
        speaker, body = None, content  # "Big news: ..." is not a speaker's label
    me = (speaker or source or "user").strip().casefold()[:80] or "user"
    found: dict[str, Fact] = {}
    for sentence in sentences(body):
        if sentence.rstrip().endswith("?") or _NEGATION.search(sentence):
            continue
        for attribute, pattern in _PATTERNS:
            for match in pattern.finditer(sentence):
                fact = _fact(attribute, match, me)
                if fact is not None and fact.slot not in found:
                    found[fact.slot] = fact
        if len(found) >= MAX_FACTS:
            break
    return list(found.values())[:MAX_FACTS]


def _names_someone(speaker: str) -> bool:
    """Whether a ``Name:`` label names a speaker: a role, or capitalised words."""
    words = speaker.split()
    return role_of(f"{speaker}: x", None) is not None or all(w[:1].isupper() for w in words)


def _fact(attribute: str, match: re.Match[str], me: str) -> Fact | None:
    groups = match.groupdict()
    subject = _subject(groups, me)
    if subject is None:
        return None
    what = (groups.get("what") or "").casefold().strip()
    if attribute == "possessive":
        if what not in SINGLE_VALUED:
            return None
        attribute = what
    elif attribute in ("favourite", "preference") and what:
        attribute = f"{attribute} {what}"
    elif attribute == "moved date" and what:
        attribute = what  # "the deadline was moved to ..." and "my deadline is ...": one slot
    elif attribute == "amount":
        attribute = what if what else "income"
    attribute = attribute_name(attribute)
    value = _value(groups["val"], attribute)
    if not value:
        return None
    return Fact(subject, attribute, value)


def _subject(groups: dict[str, str | None], me: str) -> str | None:
    relation = groups.get("rel")
    if relation:
        relation = relation.casefold()
        return f"{me}'s {RELATION_SUBJECTS.get(relation, relation)}"
    name = groups.get("subj") or groups.get("poss")
    if name is None:  # "my ...", or a note that names no subject ("Moved to Porto.")
        return me
    if name.casefold() in ("i", "we"):
        return me
    if name.split()[0] in _NOT_NAMES:
        return None
    return name.casefold()


def _value(text: str | None, attribute: str) -> str:
    """The value's core: cut at the first clause word, articles off, a few words."""
    if text is None:
        return ""
    if attribute in _AMOUNTS:
        number = _AMOUNT.search(text)
        return number.group(0).replace(",", "").casefold() if number else ""
    text = _VALUE_END.sub("", text.strip())
    text = _ARTICLE.sub("", text.strip())
    words = _WORD.findall(text)[:VALUE_WORDS]
    value = " ".join(words).strip(" .'").casefold()
    if attribute in ("residence", "employer", "car") and not text[:1].isupper() and words:
        # A place, company or make is a name: "moved to a bigger flat" gives no new place.
        return "" if not any(w[:1].isupper() for w in words) else value
    return value


def attribute_name(attribute: str) -> str:
    """The name slots use for ``attribute`` (:data:`ALIASES`)."""
    return ALIASES.get(attribute, attribute)


#: A hypothetical ("if you were ordering", "if I were you") is not the past tense.
_HYPOTHETICAL = re.compile(r"\b(?:if|as if|even if|suppose|imagine) \w+ were\b", re.IGNORECASE)


def asks_about_past(question: str) -> bool:
    """Whether ``question`` asks about an earlier state of things, not the present one."""
    return _PAST.search(_HYPOTHETICAL.sub(" ", question)) is not None
