"""Which fact a question asks about: the subject and attribute of "Where does Ana live?".

The read-side twin of :mod:`slm.ingest.facts`. A question that asks for the value of a
single-valued attribute of someone ("Where do I work?", "What is Jordan's favourite
food?", "How much rent does Ana pay?") names a *slot*, ``subject|attribute`` in the
facts' own terms, and the memories that state a value for that slot answer it, whatever
words they use ("Ana packed up and now calls Porto home"). :func:`asked` returns the
slots; the read path favours the memories that fill them (docs/scoring.md, "Facts").

The first person ("I", "my") is the store's user: the subject a fact reader gives to a
first-person statement without a speaker label or source. A relative of the user ("my
sister") is the user's relative, as in the facts.
"""

from __future__ import annotations

import re

from slm.ingest.facts import (
    NAME_PATTERN,
    RELATION_SUBJECTS,
    RELATIVES,
    SINGLE_VALUED,
    attribute_name,
)

#: The subject of the first person in a question.
USER = "user"

_WHO = rf"(?:(?P<me>I|me)|[Mm]y (?P<rel>{RELATIVES})|(?P<name>(?-i:{NAME_PATTERN})))"
_WHOSE = rf"(?:(?P<my>[Mm]y|[Oo]ur)|{_WHO}'s)"
_DO = r"(?:do|does|did|am|is|are|was|were|have|has)"
_NOW = r"(?:(?:currently|now|still|actually|these days|at the moment|right now) )*"

#: (attribute, pattern) pairs; ``what`` names the attribute where the pattern leaves it
#: open ("favourite {what}", "my {what}").
_QUESTIONS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (attribute, re.compile(pattern, re.IGNORECASE))
    for attribute, pattern in (
        ("residence", rf"\bwhere {_DO} {_WHO} {_NOW}(?:live|living|reside|residing|based|stay)"),
        (
            "residence",
            rf"\b(?:which|what) (?:city|town|country|place) {_DO} {_WHO} {_NOW}"
            r"(?:live|living|based|reside|call home|in)\b",
        ),
        ("residence", rf"\bwhere(?:'s| is| was) {_WHOSE} (?:home|flat|apartment|house|place)\b"),
        ("residence", rf"\bwhere {_DO} {_WHO} call home\b"),
        ("employer", rf"\bwhere {_DO} {_WHO} {_NOW}(?:work|working|employed)\b"),
        (
            "employer",
            rf"\b(?:who|which company|what company|which firm|what firm) {_DO} {_WHO} "
            rf"{_NOW}(?:work|working) for\b",
        ),
        (
            "employer",
            rf"\b(?:which|what) (?:company|firm|employer) {_NOW}(?:employs|employed|"
            rf"hired) {_WHO}",
        ),
        (
            "employer",
            rf"\b(?:which|what) (?:company|firm|employer) {_DO} {_WHO} {_NOW}"
            r"(?:employed by|work at|with)\b",
        ),
        ("employer", rf"\bwho (?:employs|employed|hired) {_WHO}"),
        ("job title", rf"\bwhat {_DO} {_WHO} {_NOW}do for (?:a )?(?:living|work)\b"),
        ("job title", rf"\bwhat {_DO} {_WHO} {_NOW}(?:work|working) as\b"),
        (
            "job title",
            rf"\bwhat(?:'s| is| was) {_WHOSE} {_NOW}(?:current |new )?"
            r"(?:job|job title|title|role|position|occupation|profession)\b",
        ),
        (
            "favourite",
            rf"\bwhat(?:'s| is| was| are| were) {_WHOSE} (?:current |new |all-time )?"
            r"favou?rite (?P<what>[a-z]+(?: [a-z]+)?)",
        ),
        ("car", rf"\b(?:what|which) (?:car|vehicle) {_DO} {_WHO} {_NOW}(?:drive|driving|own|have)"),
        ("car", rf"\bwhat {_DO} {_WHO} {_NOW}(?:drive|driving)\b"),
        (
            "diet",
            rf"\b(?:what|which) (?:diet|kind of diet) {_DO} {_WHO} {_NOW}(?:follow|on|"
            r"following|eat)",
        ),
        ("rent", rf"\bhow much (?:rent )?{_DO} {_WHO} {_NOW}(?:pay|paying)(?: in| for)? rent\b"),
        ("rent", rf"\bhow much rent {_DO} {_WHO} {_NOW}(?:pay|paying)\b"),
        ("income", rf"\bhow much (?:money )?{_DO} {_WHO} {_NOW}(?:earn|make|earning|making)\b"),
        (
            "amount",
            rf"\b(?:how much|what) (?:is|was|are) {_WHOSE} (?:monthly |annual |yearly |"
            r"current |new )?(?P<what>rent|salary|income|budget|weight|mortgage|pay)\b",
        ),
        ("relationship", rf"\bwhat(?:'s| is| was) {_WHOSE} relationship status\b"),
        (
            "preference",
            rf"\b(?:which|what) (?:kind of |type of )?(?P<what>[a-z]+s) {_DO} {_WHO} "
            rf"{_NOW}(?:prefer|like best|want)\b",
        ),
        (
            "moved date",
            rf"\bwhen(?:'s| is| was) {_WHOSE} (?:next |new )?"
            r"(?P<what>deadline|appointment|flight|meeting|interview|exam)\b",
        ),
        (
            "possessive",
            rf"\b(?:what|who|which|where)(?:'s| is| was) {_WHOSE} {_NOW}"
            r"(?:current |new )?(?P<what>[a-z]+)\b",
        ),
    )
)


def asked(question: str) -> tuple[str, ...]:
    """The slots (``subject|attribute``) whose value ``question`` asks for, in the order
    the question asks them; empty when it asks for none."""
    found: dict[str, None] = {}
    for attribute, pattern in _QUESTIONS:
        for match in pattern.finditer(question):
            slot = _slot(attribute, match)
            if slot is not None:
                found[slot] = None
    return tuple(found)


def _slot(attribute: str, match: re.Match[str]) -> str | None:
    groups = match.groupdict()
    what = (groups.get("what") or "").casefold()
    if attribute == "possessive":
        if what not in SINGLE_VALUED:
            return None
        attribute = what
    elif attribute == "favourite":
        attribute = f"favourite {what}"
    elif attribute == "preference":
        attribute = f"preference {what}"
    elif attribute in ("amount", "moved date"):
        attribute = what
    subject = _subject(groups)
    return None if subject is None else f"{subject}|{attribute_name(attribute)}"


def _subject(groups: dict[str, str | None]) -> str | None:
    if groups.get("me") or groups.get("my"):
        return USER
    relation = groups.get("rel")
    if relation:
        relation = relation.casefold()
        return f"{USER}'s {RELATION_SUBJECTS.get(relation, relation)}"
    name = groups.get("name")
    return name.casefold() if name else None
