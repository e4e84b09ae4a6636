"""Lexical analysis shared by indexing and querying: one function, so both sides agree.

A text becomes terms by Unicode NFKC folding, case folding, splitting on word characters,
dropping English stopwords and one-letter tokens, cutting words at 64 characters, and
Snowball (Porter 2) stemming.
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


#: Longer words (a hash, a base64 blob, a run of one letter) are indexed by their first
#: this many characters, on both sides: a PostgreSQL index entry has a size limit, and
#: nobody searches by the 65th character of a word.
MAX_TERM_CHARS = 64


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
        out.append(_stem(word[:MAX_TERM_CHARS]))
    return out


def query_terms(text: str) -> list[str]:
    """Distinct terms of a query, in order of first appearance."""
    return list(dict.fromkeys(terms(text)))


#: Phrases by which a question refers to the conversation itself rather than to what it is
#: about: "can you remind me", "a comprehensive summary of", "the order in which I brought
#: up", "across our conversations". Words such as "summary", "order", "mention" or
#: "conversations" then match nothing in particular (or every long answer) and dilute the
#: question's vector, so they are left out of both the query's terms and its embedding.
_META = re.compile(
    r"\b(?:can|could|would|will) you (?:please )?(?:list|tell me|remind me(?: of)?|give me|"
    r"walk me through|summari[sz]e|provide|show me|recall|describe|share|go over|recap)\b"
    r"|\b(?:a |an )?(?:(?:comprehensive|complete|brief|clear|detailed|quick|short|full|"
    r"general|high-level) )*(?:summary|overview|recap|rundown|run-down) of\b"
    r"|\b(?:in )?the order (?:in which|that)\b|\bin (?:what|which) order\b|\bin order\b"
    r"|\b(?:throughout|across|during|over|in|from) (?:all )?(?:of )?our "
    r"(?:previous |past |recent )?"
    r"(?:conversations?|discussions?|chats?|sessions?|talks?|exchanges?)\b"
    r"|\b(?:i|we)(?:'ve| have)? (?:brought up|mentioned|talked about|discussed|raised|"
    r"told you(?: about)?|asked (?:you )?about)\b"
    r"|(?<=brought up )(?:the )?(?:different |various )?aspects of\b"
    r"|\bmention only(?: and only)? \w+ items?\b|\bdo you remember\b",
    re.IGNORECASE,
)


def question_topic(question: str) -> str:
    """``question`` without the phrases that refer to the conversation rather than to its
    subject (see ``_META``); the question itself when nothing else would be left."""
    if _META.search(question) is None:
        return question
    topic = " ".join(_META.sub(" ", question).split())
    topic = re.sub(r"\s+([,.;:?!])", r"\1", topic)
    topic = re.sub(r"([,;:])(?:\s*[,;:])+", r"\1", topic)
    topic = re.sub(r"[,;:]+(?=[?.!]*$)", "", topic).strip(" ,.;:")
    return topic if query_terms(topic) else question
