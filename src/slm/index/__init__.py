"""What recall reads on its hot path, held in this process and kept current from the
store's change feed (:mod:`slm.store.feed`), the same on every store: the vector indexes
(:mod:`slm.index.vectors`, the exact and graph kinds; :mod:`slm.index.vector_cache`, one
per profile following the feed) and the edge arrays (:mod:`slm.index.edges`, each
profile's memory-to-memory edges). The store keeps the rows of record; an index is rebuilt
from them at any time."""
