"""Lexical analysis shared by indexing and querying: one function, so both sides agree.

A text becomes terms by Unicode NFKC folding, case folding, splitting on word characters,
dropping English stopwords and one-letter tokens, and Snowball (Porter 2) stemming.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import Stemmer

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_STEMMER = Stemmer.Stemmer("english")

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been before
    being below between both but by can can't cannot could couldn't did didn't do does doesn't
    doing don't down during each few for from further had hadn't has hasn't have haven't having
    he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've
    if in into is isn't it it's its itself let's me more most mustn't my myself no nor not of off
    on once only or other ought our ours ourselves out over own same shan't she she'd she'll she's
    should shouldn't so some such than that that's the their theirs them themselves then there
    there's these they they'd they'll they're they've this those through to too under until up
    very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's
    which while who who's whom why why's will with won't would wouldn't you you'd you'll you're
    you've your yours yourself yourselves also just really yeah oh hey hi ok okay um uh s t d ll
    re ve m
    """.split()
)


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    stemmed: str = _STEMMER.stemWord(word)
    return stemmed


def terms(text: str) -> list[str]:
    """Index terms of ``text`` in order, repeats kept (term frequency matters to BM25)."""
    folded = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    out: list[str] = []
    for match in _WORD.finditer(folded):
        word = match.group()
        if word in STOPWORDS:
            continue
        if word.endswith("'s"):
            word = word[:-2]
        word = word.replace("'", "")
        if len(word) < 2 and not word.isdigit():
            continue
        out.append(_stem(word))
    return out


def query_terms(text: str) -> list[str]:
    """Distinct terms of a query, in order of first appearance."""
    return list(dict.fromkeys(terms(text)))
