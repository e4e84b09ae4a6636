"""What recall reads on its hot path, held in this process and kept current from the
store's change feed (:mod:`slm.store.feed`): the vector indexes (:mod:`slm.index.vectors`,
the exact and graph kinds; :mod:`slm.index.vector_cache`, one per profile following the
feed). The store keeps the rows of record; an index is rebuilt from them at any time."""
