"""Reading a question once for the whole recall (no LLM): its subject, terms, named
entities and the stored entities they resolve to, its time window, whether it asks "when",
and the text its embedding is made from. Within one user's scope, a question naming that
user in the third person is read as they would ask it (``slm.recall.whose``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import numpy as np

from slm.channels import Query
from slm.channels.postings import Lexicon
from slm.embed import Matrix
from slm.ingest.asked import asked
from slm.ingest.entities import Mention, extract_entities, without_names
from slm.ingest.facts import asks_about_past
from slm.ingest.text import query_terms, question_topic
from slm.ingest.timeexpr import is_when_question, query_window
from slm.recall.whose import first_person, scoped_user
from slm.store import Filters, Store

#: The query vector of a question still being embedded: empty, so a channel that reads it
#: too early fails on the shape instead of scoring against zeros.
PENDING: Matrix = np.zeros(0, dtype=np.float32)
#: A speaker mentioned by at least this share of a profile's memories is left out of the
#: query embedding (see ``_everywhere``).
EVERYWHERE = 0.1


def interpret(
    store: Store,
    profile: str,
    text: str,
    now: datetime,
    filters: Filters,
    allowed: frozenset[int] | None,
) -> tuple[Query, Lexicon]:
    """The :class:`Query` (its vector :data:`PENDING`: the engine embeds ``embedded_text``
    while the standalone channels run) and the lexicon view of its terms."""
    mentions = extract_entities(text)
    names = tuple(m.key for m in mentions)
    # Within one user's scope, a question about them by name is read in the first person.
    user = scoped_user(filters.metadata)
    mine = first_person(text, user) if user is not None else None
    read = text if mine is None else mine
    subject = question_topic(read)
    words = tuple(query_terms(subject))
    matches = store.find_entities(profile, names)
    lexicon = Lexicon(store, profile, words)
    speakers = _everywhere(store, profile, mentions, matches, lexicon.stats.n_docs)
    query = Query(
        text=text,
        profile=profile,
        vector=PENDING,
        embedded_text=without_names(subject, speakers),
        terms=words,
        now=now,
        filters=filters,
        allowed=allowed,
        entities=names,
        entity_ids={n: tuple((e, count) for e, _, count in m) for n, m in matches.items()},
        window=query_window(text, now),
        when=is_when_question(read),
        past=asks_about_past(read),
        asked=tuple(dict.fromkeys((*asked(read), *asked(text)))),
        first_person=mine,
    )
    return query, lexicon


def _everywhere(
    store: Store,
    profile: str,
    mentions: Sequence[Mention],
    matches: Mapping[str, Sequence[tuple[int, str, int]]],
    memories: int,
) -> list[str]:
    """The names in a question of people who speak in this store and are mentioned by at
    least ``EVERYWHERE`` of its memories: two or three people talking, whose names open
    or address nearly every turn. BM25, the entity graph and the speaker boost match them
    exactly; in the query embedding they would drown the question's topic (on LoCoMo dev,
    leaving them out took hit@10 from 0.78 to 0.81). Rarer names, and names of people
    who never speak (in notes about them), carry information and stay."""
    frequent = {
        name: {entity for entity, _, count in found if count >= EVERYWHERE * memories}
        for name, found in matches.items()
    }
    candidates = [entity for ids in frequent.values() for entity in ids]
    if not candidates:
        return []
    talking = store.speakers(profile, candidates)
    return [m.surface for m in mentions if frequent.get(m.key, set()) & talking]
