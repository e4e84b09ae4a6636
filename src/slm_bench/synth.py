"""Synthetic chat memories at any scale, deterministic from a seed (BENCHMARK.md section 2).

Corpus. Speakers (about 300 first names) hold sessions of 5-30 alternating turns with one of
their eight friends; a turn is ``"{Speaker}: {sentence}"`` with metadata ``conversation``
(the pair) and ``session`` (its number within the pair), so the store links consecutive
turns. Sessions start on random days of 2020-2024 (UTC) and turns are a minute apart. A
sentence (10-25 words) fills one of a few dozen chat templates with two or three invented
content words, sometimes a real topic word (hobbies, food, places, work), one of 5,000
capitalised place/organisation/person names, the other speaker's name, and a date the time
module resolves ("on March 3, 2023", "last week", "in July 2024", "yesterday"). Content words
come from 20,000 pronounceable pseudo-words whose stems are all distinct, drawn with a
Zipf-Mandelbrot law ``p(r) ~ 1 / (r + 2.7)``: a few are common, most are rare.

Queries. ``queries`` memories are chosen as targets. Each question is built from its target's
rarest content words plus cues (speaker, named entity, topic word, the month or a relative
"last week" with the matching ``now``) and is phrased differently from the memory. Cues are
added until the expected number of other memories sharing all of them is below
``SPECIFICITY``, so the target stays findable at a million memories.

Vectors. Embedding a million texts with the real model takes hours, so bulk loads use
*composed* vectors (``slm_bench.scale.compose``): every token (pseudo-word, topic word,
speaker name, entity name, :attr:`Synth.tokens`) is embedded once by the real model, and a
memory's vector is the unit-normalised sum of its tokens' vectors weighted by their inverse
document frequency ``-log p(token in a memory)`` (:attr:`Batch.weights`). Function words and
date phrases weigh nothing. Queries are always embedded by the real model at recall time.

Every random choice comes from numpy generators seeded with ``(seed, stream)``, so memories and
queries are reproducible on every machine and independent of how callers batch them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

from slm.engine import MemoryInput
from slm.ingest.entities import extract_entities
from slm.ingest.text import STOPWORDS, terms

#: Memories are drawn in chunks of this size; the stream does not depend on it otherwise.
CHUNK = 5000
#: Queries gain cues until fewer than this many other memories are expected to match them all.
SPECIFICITY = 0.02
FRIENDS = 8
_ZIPF_SHIFT = 2.7
_ENTITY_ZIPF = 0.9
_START = datetime(2020, 1, 1, tzinfo=UTC)
_DAYS = 5 * 365
_MONTHS = (
    "January February March April May June July August September October November December"
).split()
_WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()

IntArray = npt.NDArray[np.int64]
_Slot = tuple[int, int, datetime, str, str]
FloatArray = npt.NDArray[np.float64]

TOPICS = tuple(
    dict.fromkeys(
        """
    painting pottery gardening hiking climbing cycling running swimming surfing skiing
    snowboarding kayaking camping fishing knitting sewing crochet baking cooking photography
    chess poker sudoku crosswords yoga pilates meditation dancing salsa tango karaoke singing
    guitar piano violin drums ukulele saxophone trumpet cello sketching calligraphy origami
    woodworking carpentry birdwatching stargazing astronomy archery fencing boxing karate judo
    tennis badminton squash volleyball basketball football soccer baseball cricket rugby golf
    bowling skating skateboarding gaming podcasts blogging journaling poetry scrapbooking
    quilting embroidery beekeeping foraging geocaching volunteering pasta pizza sushi ramen
    tacos burritos curry dumplings noodles risotto lasagna paella falafel hummus kimchi tofu
    salmon tuna shrimp oysters lobster steak brisket chicken turkey bacon sausage omelette
    pancakes waffles croissants bagels muffins cupcakes brownies cookies cheesecake tiramisu
    gelato sorbet pudding yogurt granola oatmeal smoothies espresso cappuccino latte tea matcha
    kombucha lemonade cider wine beer whiskey avocado mango pineapple strawberries blueberries
    cherries peaches apples bananas lemons tomatoes potatoes carrots broccoli spinach kale
    mushrooms peppers onions garlic ginger cinnamon vanilla chocolate caramel honey cheese
    sourdough baguette pretzels popcorn nachos guacamole soup stew chili barbecue museum gallery
    library theater cinema stadium zoo aquarium bakery cafe restaurant pub brewery vineyard farm
    ranch cabin cottage apartment studio warehouse factory campus clinic pharmacy gym pool
    lighthouse castle cathedral temple tower deadline meeting presentation budget invoice
    contract client manager startup interview promotion salary spreadsheet database server
    laptop website newsletter conference workshop seminar internship freelance portfolio
    proposal pitch prototype research experiment thesis lecture exam homework dog cat puppy
    kitten parrot hamster rabbit horse bicycle motorcycle truck van boat train plane backpack
    suitcase camera telescope headphones keyboard notebook sketchbook jacket sweater boots
    sneakers umbrella blanket candle lamp sofa succulents tulips sunflowers birthday wedding
    anniversary graduation holiday vacation festival concert party picnic marathon tournament
    recital exhibition
    """.split()
    )
)

FIRST_NAMES = tuple(
    dict.fromkeys(
        """
    Alice Aaron Abigail Adam Adrian Aisha Alan Albert Alejandro Alexander Alexis Alfred Ali
    Alicia Alma Amanda Amara Amelia Amir Amy Ana Andre Andrea Andrew Angela Anita Anna Anthony
    Antonio Arjun Arthur Asha Astrid Audrey Ava Barbara Beatrice Benjamin Bernard Bianca Boris
    Brandon Brenda Brian Bruno Caleb Camila Carl Carla Carlos Carmen Caroline Catherine Cecilia
    Charles Charlotte Chloe Claire Clara Colin Connor Craig Cristina Daniel Daniela Dante Darius
    David Deborah Declan Denise Derek Diana Diego Dmitri Dominic Donna Dorothy Dylan Edgar Edith
    Eduardo Edward Elena Elias Elijah Elise Ella Ellen Eloise Emil Emily Emma Enzo Eric Erika
    Ernest Esther Ethan Eva Evelyn Ezra Fatima Felix Fernando Fiona Francesca Francis Freya
    Gabriel Gemma George Gerald Gianna Gilbert Gloria Gordon Greta Gustavo Hana Hannah Harold
    Harper Harriet Hassan Hector Helen Henry Hiro Holly Hugo Ian Ibrahim Ida Ines Ingrid Irene
    Iris Isaac Isabel Ivan Jacob Jake James Jamal Jane Javier Jasmine Jason Jenna Jeremy Jessica
    Joan Joel Jonas Jordan Jorge Joseph Joshua Julia Julian Juliet Kai Karen Karim Kate Keith
    Kenji Kevin Kiara Laila Lars Laura Lauren Leah Leila Leo Leon Liam Lila Linda Lionel Lisa
    Lorenzo Louis Lucas Lucia Luis Luka Luna Lydia Magnus Maja Malik Marco Marcus Margaret Maria
    Marina Mario Marta Martin Mateo Maya Megan Mei Melanie Mia Michael Miguel Mila Milo Mina
    Miriam Mohammed Monica Nadia Naomi Natalia Nathan Neil Nicholas Nina Noah Nora Olga Oliver
    Olivia Omar Oscar Owen Pablo Paloma Patricia Paul Paula Pedro Peter Philip Priya Quentin
    Rachel Rafael Rahul Ravi Rebecca Ricardo Rita Robert Roberto Rosa Ruben Ruth Ryan Sabrina
    Samuel Sandra Santiago Sara Sebastian Selma Sergio Simon Sofia Sophie Stefan Stella Stephen
    Susan Sven Tamara Tanya Teresa Thomas Tobias Tomas Uma Ursula Valentina Vanessa Victor
    Victoria Vincent Walter Wanda Wendy Xavier Yara Yasmin Yusuf Zara Zoe Zoran Agnes Anton Bea
    Cyrus Elif Emre Farah Gideon Imani Jonah Kofi Lena Mateus Nikolai Odette Petra Rania Silas
    Tariq Ulla Vera Wilhelm Yuki Zeynep Anders Bodhi Cosima Dario Esme Femi Hugh Isla Joaquin
    Kirra Lotte Nils Orla Ottilie Reza Saoirse Teodor Viggo Wren Ximena Yannick Zofia
    """.split()
    )
)

_ONSETS = (
    "b c d f g h j k l m n p r s t v w z br bl cr cl dr fr gr gl kr pl pr sk sl sn sp st tr".split()
)
_NUCLEI = "a e i o u a e i o u ai ea ou oo ie".split()
_CODAS = ["", "", "", "n", "r", "l", "m", "k", "x", "nd", "rt", "lm", "sk"]
_NOT_WORDS = frozenset(
    "today tonight tomorrow yesterday week weekend month year spring summer fall autumn winter "
    "ago back next last past".split()
) | frozenset(m.lower() for m in _MONTHS + _WEEKDAYS)

_PLACE_SUFFIX = (
    "Market Park Street Lake River Bay Valley Island Square Harbor Station Trail".split()
)
_PLACE_PREFIX = "Lake Mount Port Fort".split()
_ORG_SUFFIX = (
    "Bank Club Group Foundation University College Company Institute Society Academy Labs".split()
)
_HONORIFIC = "Dr. Mrs. Mr. Prof.".split()
_PREPOSITION = {"place": "at", "org": "from", "person": "with"}
_KINDS = ("speaker", "entity", "when", "month", "relative", "words")
_SPEAKER_KINDS = frozenset({"speaker", "when", "month", "relative"})

# Slots: {a} {b} {c} content words, {t} topic word, {e} named entity, {o} the other speaker,
# {w} an optional date phrase (empty or starting with a space).
TEMPLATES = (
    "I finally tried the {a} {b} at {e}{w}, and honestly it beat the {c} we had before.",
    "Do you remember the {a} we talked about? {e} is selling a {b} version of it now.",
    "My {t} group spent the whole afternoon on {a} and {b}{w}, exhausting but really fun.",
    "{o}, you should really see the {a} near {e}, the {b} over there is amazing.",
    "We went to {e}{w} to look for a {a}, but they only had {b} and some {c}.",
    "I have been reading about {a} lately, apparently it goes well with {t} and {b}.",
    "Not sure if I told you, but I started {t}{w} and my teacher keeps talking about {a} {b}.",
    "The {a} from {e} arrived broken{w}, so I am sending it back along with the {b}.",
    "Honestly the best part of the trip was the {a} {b} we found at {e}.",
    "Can you bring the {a} and the {b} to my place? We need them for {t} with {o}.",
    "I keep thinking about that story you told me about the {a} {b} and {e}.",
    "My sister says {a} is overrated, but I still think {b} with {c} is the best thing ever.",
    "Someone from {e} called me{w} about the {a} project, they want a {b} soon.",
    "We should plan a {t} day with {a} and {b} before everyone gets too busy again.",
    "I lost my {a} at {e}{w}, does anyone still have the spare {b} from last time?",
    "After work I usually do some {t}, then cook {a} with a bit of {b} and {c}.",
    "Thanks for the tip about {a}! The {b} at {e} was exactly what I needed{w}.",
    "I signed up for a {t} class at {e}, the first lesson is all about {a} and {b}.",
    "Guess what, my neighbour bought a {a} and now the whole building smells like {b}.",
    "It rained all day{w}, so we stayed in, tried some {t} and argued about {a} and {b}.",
    "{o} told me the {a} at {e} is closing, which is sad because their {b} was great.",
    "I think I finally figured out the {a} problem, it was the {b} all along, not the {c}.",
)
_SLOTS = tuple(frozenset(re.findall(r"\{(\w)\}", t)) for t in TEMPLATES)


@dataclass(frozen=True, slots=True)
class SynthQuery:
    """A question with one known target memory; ``now`` anchors relative time in it."""

    text: str
    target: str
    now: datetime | None
    kind: str
    warmup: bool


@dataclass(frozen=True, slots=True)
class Batch:
    """Consecutive memories; row ``i`` of ``tokens``/``weights`` says what memory ``i`` is about
    (indexes into :attr:`Synth.tokens`, padded with ``len(tokens)`` and weight 0)."""

    items: list[MemoryInput]
    tokens: IntArray
    weights: FloatArray
    queries: list[SynthQuery]


@dataclass(slots=True)
class _Cues:
    """What a question names of its target: content words, speaker, entity, topic, month."""

    words: list[int]
    speaker: bool
    entity: bool
    topic: bool = False
    month: bool = False


@dataclass(frozen=True, slots=True)
class _Turn:
    """One generated memory before rendering; ``topic``/``entity`` are -1 when unused."""

    index: int
    speaker: int
    other: int
    when: datetime
    conversation: str
    session: str
    template: int
    words: tuple[int, ...]
    topic: int
    entity: int
    phrase: str


@dataclass(frozen=True, slots=True)
class _Draws:
    """The random choices of a chunk of memories, drawn as arrays (one row per memory)."""

    template: IntArray
    words: IntArray
    topic: IntArray
    entity: IntArray
    dated: npt.NDArray[np.bool_]
    date_kind: IntArray
    days_back: IntArray

    def turn(self, index: int, row: int, slot: _Slot) -> _Turn:
        speaker, other, when, conversation, session = slot
        template = int(self.template[row])
        used = _SLOTS[template]
        phrase = ""
        if "w" in used and self.dated[row]:
            phrase = _date_phrase(when, int(self.date_kind[row]), int(self.days_back[row]))
        return _Turn(
            index=index,
            speaker=speaker,
            other=other,
            when=when,
            conversation=conversation,
            session=session,
            template=template,
            words=tuple(int(w) for w, s in zip(self.words[row], "abc", strict=True) if s in used),
            topic=int(self.topic[row]) if "t" in used else -1,
            entity=int(self.entity[row]) if "e" in used else -1,
            phrase=phrase,
        )


def memory_id(index: int) -> str:
    """The id of the ``index``-th generated memory (16 lowercase hex digits)."""
    return f"{index:016x}"


def _zipf_cdf(size: int, exponent: float = 1.0) -> FloatArray:
    p = 1.0 / (np.arange(size, dtype=np.float64) + _ZIPF_SHIFT) ** exponent
    cdf: FloatArray = np.cumsum(p / p.sum())
    cdf[-1] = 1.0
    return cdf


def _probabilities(cdf: FloatArray) -> FloatArray:
    return np.diff(cdf, prepend=0.0)


def pseudo_words(count: int, rng: np.random.Generator, taken: set[str]) -> list[str]:
    """``count`` pronounceable invented words whose index terms (stems) are all distinct and
    distinct from ``taken`` (which gains them)."""
    out: list[str] = []
    while len(out) < count:
        parts = rng.integers(0, 1 << 30, size=(4096, 7))
        for row in parts.tolist():
            syllables = 2 if row[0] % 10 < 7 else 3
            word = "".join(
                _ONSETS[row[1 + 2 * s] % len(_ONSETS)]
                + _NUCLEI[row[2 + 2 * s] % len(_NUCLEI)]
                + (_CODAS[(row[1 + 2 * s] >> 8) % len(_CODAS)] if s == syllables - 1 else "")
                for s in range(syllables)
            )
            stems = terms(word)
            if len(word) < 4 or word in STOPWORDS or word in _NOT_WORDS or len(stems) != 1:
                continue
            if stems[0] in taken or word in taken:
                continue
            taken.update((stems[0], word))
            out.append(word)
            if len(out) == count:
                break
    return out


def _entities(roots: list[str], rng: np.random.Generator) -> tuple[list[str], list[str]]:
    """Capitalised names from invented roots: places, organisations and people."""
    names: dict[str, str] = {}
    position = 0
    while position + 1 < len(roots):
        root, pick = roots[position].capitalize(), int(rng.integers(10))
        position += 1
        if pick < 4:
            name, kind = f"{root} {_PLACE_SUFFIX[int(rng.integers(len(_PLACE_SUFFIX)))]}", "place"
        elif pick < 5:
            name, kind = f"{_PLACE_PREFIX[int(rng.integers(len(_PLACE_PREFIX)))]} {root}", "place"
        elif pick < 8:
            name, kind = f"{root} {_ORG_SUFFIX[int(rng.integers(len(_ORG_SUFFIX)))]}", "org"
        elif pick < 9:
            name, kind = f"{_HONORIFIC[int(rng.integers(len(_HONORIFIC)))]} {root}", "person"
        else:
            name, kind = f"{root} {roots[position].capitalize()}", "person"
            position += 1
        names.setdefault(name, kind)
    return list(names), list(names.values())


class Synth:
    """The generator: ``n`` memories and ``queries`` questions for ``seed``.

    Token indexes: ``[0, V)`` content words by Zipf rank, then topic words, speakers, entities.
    """

    def __init__(
        self,
        n: int,
        seed: int = 0,
        *,
        queries: int = 220,
        warmup: int = 20,
        vocab: int = 20_000,
        entities: int = 5_000,
    ) -> None:
        if n < 1 or not 0 <= queries <= n or not 0 <= warmup <= queries:
            raise ValueError("need n >= 1 and 0 <= warmup <= queries <= n")
        self.n, self.seed, self.vocab_size = n, seed, vocab
        self.speakers = [f for f in FIRST_NAMES if _is_speaker(f)]
        taken = {w for t in (*TOPICS, *self.speakers) for w in (t.lower(), *terms(t))}
        self.words = pseudo_words(vocab, np.random.default_rng([seed, 0]), taken)
        rng = np.random.default_rng([seed, 1])
        roots = pseudo_words(int(entities * 1.15) + 16, rng, taken)
        names, kinds = _entities(roots, rng)
        self.entities, self.entity_kinds = names[:entities], kinds[:entities]
        self.friends = [
            rng.choice(
                [s for s in range(len(self.speakers)) if s != a], FRIENDS, replace=False
            ).tolist()
            for a in range(len(self.speakers))
        ]
        self.tokens: tuple[str, ...] = (*self.words, *TOPICS, *self.speakers, *self.entities)
        self._word_cdf = _zipf_cdf(len(self.words))
        self._entity_cdf = _zipf_cdf(len(self.entities), _ENTITY_ZIPF)
        self._presence = self._token_presence()
        self.weights = -np.log(np.clip(self._presence, 1e-12, 1.0))
        chosen = np.random.default_rng([seed, 2]).choice(n, size=queries, replace=False)
        self._targets = {int(t): i < warmup for i, t in enumerate(chosen.tolist())}

    @property
    def vocabulary(self) -> frozenset[str]:
        """Every distinct word the memories can contain (lower case)."""
        plain = " ".join(re.sub(r"\{\w\}", " ", t) for t in TEMPLATES)
        template_words = {w.lower() for w in re.findall(r"[A-Za-z]+", plain)}
        named = {w.lower().rstrip(".") for t in (*self.speakers, *self.entities) for w in t.split()}
        return frozenset({*self.words, *TOPICS, *named, *template_words})

    def _token_presence(self) -> FloatArray:
        """Probability that a memory contains each token (the weights and the cue budget)."""
        share = {s: sum(s in slots for slots in _SLOTS) / len(TEMPLATES) for s in "abcteo"}
        draws = share["a"] + share["b"] + share["c"]
        return np.concatenate(
            [
                draws * _probabilities(self._word_cdf),
                np.full(len(TOPICS), share["t"] / len(TOPICS)),
                np.full(len(self.speakers), (1 + share["o"]) / len(self.speakers)),
                share["e"] * _probabilities(self._entity_cdf),
            ]
        )

    def _offset(self, kind: str) -> int:
        return {
            "word": 0,
            "topic": len(self.words),
            "speaker": len(self.words) + len(TOPICS),
            "entity": len(self.words) + len(TOPICS) + len(self.speakers),
        }[kind]

    # -- memories -----------------------------------------------------------------------

    def batches(self) -> Iterator[Batch]:
        """All ``n`` memories in order, in batches of ``CHUNK``."""
        yield from self._stream(self.n, 0, np.random.default_rng([self.seed, 3]), queries=True)

    def extra(self, count: int, batch: int = 500) -> Iterator[Batch]:
        """``count`` more memories (ids after the first ``n``, sessions of their own), in
        batches of ``batch``."""
        rng = np.random.default_rng([self.seed, 4])
        for chunk in self._stream(count, self.n, rng, queries=False):
            for start in range(0, len(chunk.items), batch):
                part = slice(start, start + batch)
                yield Batch(chunk.items[part], chunk.tokens[part], chunk.weights[part], [])

    def _stream(
        self, count: int, first: int, rng: np.random.Generator, *, queries: bool
    ) -> Iterator[Batch]:
        sessions = self._sessions(rng, "" if queries else "extra-")
        for start in range(first, first + count, CHUNK):
            size = min(CHUNK, first + count - start)
            turns = [next(sessions) for _ in range(size)]
            yield self._batch(turns, start, rng, queries)

    def _sessions(self, rng: np.random.Generator, prefix: str) -> Iterator[_Slot]:
        """Turn slots (speaker, other, time, conversation, session) of endless sessions."""
        counters: dict[str, int] = {}
        while True:
            a = int(rng.integers(len(self.speakers)))
            b = self.friends[a][int(rng.integers(FRIENDS))]
            conversation = f"c{min(a, b):03d}-{max(a, b):03d}"
            counters[conversation] = counters.get(conversation, 0) + 1
            day = int(rng.integers(_DAYS))
            begin = _START + timedelta(days=day, hours=int(rng.integers(8, 22)))
            session = f"{prefix}{counters[conversation]}"
            for turn in range(int(rng.integers(5, 31))):
                speaker, other = (a, b) if turn % 2 == 0 else (b, a)
                yield speaker, other, begin + timedelta(minutes=turn), conversation, session

    def _batch(
        self, slots: list[_Slot], start: int, rng: np.random.Generator, queries: bool
    ) -> Batch:
        size = len(slots)
        words = np.searchsorted(self._word_cdf, rng.random((size, 3)))
        for column in (1, 2):  # distinct words in one memory: step past a repeat
            for _ in range(2):
                repeat = (words[:, column : column + 1] == words[:, :column]).any(axis=1)
                words[repeat, column] = (words[repeat, column] + 1) % len(self.words)
        draws = _Draws(
            template=rng.integers(len(TEMPLATES), size=size),
            words=words,
            topic=rng.integers(len(TOPICS), size=size),
            entity=np.searchsorted(self._entity_cdf, rng.random(size)),
            dated=rng.random(size) < 0.3,
            date_kind=rng.integers(5, size=size),
            days_back=rng.integers(1, 120, size=size),
        )
        tokens = np.full((size, 7), len(self.tokens), dtype=np.int64)
        items: list[MemoryInput] = []
        found: list[SynthQuery] = []
        for row, slot in enumerate(slots):
            turn = draws.turn(start + row, row, slot)
            items.append(self._memory(turn))
            tokens[row] = self._token_row(turn)
            if queries and turn.index in self._targets:
                found.append(self._question(turn))
        padded = np.append(self.weights, 0.0)
        return Batch(items, tokens, padded[tokens], found)

    def _memory(self, turn: _Turn) -> MemoryInput:
        words = [self.words[w] for w in turn.words] + [""]
        text = TEMPLATES[turn.template].format(
            a=words[0],
            b=words[1],
            c=words[2],
            t=TOPICS[turn.topic] if turn.topic >= 0 else "",
            e=self.entities[turn.entity] if turn.entity >= 0 else "",
            o=self.speakers[turn.other],
            w=turn.phrase,
        )
        speaker = self.speakers[turn.speaker]
        return MemoryInput(
            f"{speaker}: {text}",
            event_time=turn.when,
            source=speaker,
            metadata={"conversation": turn.conversation, "session": turn.session},
            id=memory_id(turn.index),
        )

    def _token_row(self, turn: _Turn) -> IntArray:
        """What the memory is about, for composing its vector: content words, speaker, topic,
        entity, the other speaker when named; unused columns hold the padding index."""
        row = np.full(7, len(self.tokens), dtype=np.int64)
        row[: len(turn.words)] = turn.words
        row[3] = self._offset("speaker") + turn.speaker
        if turn.topic >= 0:
            row[4] = self._offset("topic") + turn.topic
        if turn.entity >= 0:
            row[5] = self._offset("entity") + turn.entity
        if "o" in _SLOTS[turn.template]:
            row[6] = self._offset("speaker") + turn.other
        return row

    # -- queries ------------------------------------------------------------------------

    def _question(self, turn: _Turn) -> SynthQuery:
        """A question about ``turn`` (see the module docstring)."""
        rng = np.random.default_rng([self.seed, 5, turn.index])
        kind = _KINDS[int(rng.integers(len(_KINDS)))]
        if kind == "entity" and turn.entity < 0:
            kind = "speaker"
        rarest = sorted(set(turn.words), reverse=True)
        cues = _Cues(rarest[:2], kind in _SPEAKER_KINDS, kind == "entity", month=kind == "month")
        for more in (*rarest[2:], "speaker", "entity", "topic", "month"):
            if self.n * self._chance(turn, cues, kind) < SPECIFICITY:
                break
            if isinstance(more, int):
                cues.words.append(more)
            elif more == "speaker":
                cues.speaker = True
            elif more == "entity":
                cues.entity = turn.entity >= 0
            elif more == "topic":
                cues.topic = turn.topic >= 0
            else:
                cues.month = kind in ("speaker", "entity", "words")
        return self._phrase(turn, kind, cues, rng)

    def _chance(self, turn: _Turn, cues: _Cues, kind: str) -> float:
        """Probability that a random memory matches every cue (treated as independent)."""
        chance = math.prod(float(self._presence[w]) for w in cues.words)
        if cues.speaker:
            chance *= float(self._presence[self._offset("speaker") + turn.speaker])
        if cues.entity:
            chance *= float(self._presence[self._offset("entity") + turn.entity])
        if cues.topic:
            chance *= float(self._presence[self._offset("topic") + turn.topic])
        if cues.month:
            chance *= 30 / _DAYS
        return chance * (7 / _DAYS if kind == "relative" else 1.0)

    def _phrase(self, turn: _Turn, kind: str, cues: _Cues, rng: np.random.Generator) -> SynthQuery:
        picked = [self.words[w] for w in cues.words]
        rng.shuffle(picked)
        if cues.topic:
            picked.append(TOPICS[turn.topic])
        if len(picked) == 2:
            things = f"the {picked[0]} and the {picked[1]}"
        else:
            things = f"{', '.join(picked[:-1])} and {picked[-1]}"
        who, other = self.speakers[turn.speaker], self.speakers[turn.other]
        now, tail = None, ""
        if cues.entity:
            tail = f" {_PREPOSITION[self.entity_kinds[turn.entity]]} {self.entities[turn.entity]}"
        if cues.month:
            tail += f" in {_MONTHS[turn.when.month - 1]} {turn.when.year}"
        elif kind == "relative":
            tail, now = tail + " last week", turn.when + timedelta(days=7)
        opener: tuple[str, ...]
        if not cues.speaker:
            opener = ("Who talked about", "What was that about", "Remind me about")
        elif kind == "when":
            opener = (f"When did {who} mention",)
        else:
            opener = (f"What did {who} say about", f"What did {who} tell {other} about")
        text = f"{opener[int(rng.integers(len(opener)))]} {things}{tail}?"
        return SynthQuery(text, memory_id(turn.index), now, kind, self._targets[turn.index])


def _is_speaker(name: str) -> bool:
    found = extract_entities(f"{name}: hello there")
    return bool(found) and found[0].speaker and name.lower() not in TOPICS


def _date_phrase(moment: datetime, kind: int, back: int) -> str:
    """A date phrase the time module resolves, about a day ``back`` days before ``moment``."""
    day = moment - timedelta(days=back)
    if kind == 0:
        return f" on {_MONTHS[day.month - 1]} {day.day}, {day.year}"
    if kind == 1:
        return " last week"
    if kind == 2:
        return f" in {_MONTHS[day.month - 1]} {day.year}"
    if kind == 3:
        return " yesterday"
    return f" last {_WEEKDAYS[day.weekday()]}"
