"""Standing-statement channel: the user's instructions and preferences that apply to the
request.

At write time a memory's standing statements are recognised ("Always include version
numbers when I ask about libraries", "I prefer minimal dependencies";
:mod:`slm.ingest.standing`) and the scope of each, what it applies to, is embedded. A
request falls under a statement when it is about that scope, even with no word in
common with the memory ("Which libraries does the project use?"). The channel ranks the
statements the recall may see (its filters and scope, applied before the search) by the
cosine between the question and their scopes and returns the memories stating the best
``STANDING_HITS`` of them, at least ``SCOPE_FLOOR`` similar.

Statements are few next to memories, so the search is exact and cheap; its hits' scores
are scope cosines, which the evidence step also reads (a rule that applies is evidence
for its memory even where the memory's own text resembles the question little).
"""

from __future__ import annotations

from typing import ClassVar

from slm.channels.base import ChannelDefaults, Context, Hit, Need, Role, ranked

#: How many statements a request is matched with.
STANDING_HITS = 2
#: Below this cosine between a request and a scope, the statement does not apply.
SCOPE_FLOOR = 0.2


class StandingChannel(ChannelDefaults):
    name: ClassVar[str] = "standing"
    weight: ClassVar[float] = 1.0
    needs: ClassVar[frozenset[Need]] = frozenset({"vector"})
    role: ClassVar[Role] = "applies"
    index: ClassVar[str | None] = None

    def candidates(self, context: Context, k: int) -> list[Hit]:
        query = context.query
        best: dict[int, float] = {}
        for key, _, _, cosine in context.vectors.standing_search(
            query.profile, query.vector, STANDING_HITS, query.allowed
        ):
            if cosine >= SCOPE_FLOOR and query.admits(key):
                best[key] = max(best.get(key, cosine), cosine)
        return ranked(list(best.items()), k)
