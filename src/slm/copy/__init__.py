"""Copies of a store's memories: JSON Lines export and import (:mod:`~slm.copy.jsonl`,
docs/transfer.md), a whole store into another between SQLite and PostgreSQL
(:mod:`~slm.copy.stores`, ``slm migrate``) and a consistent copy of a live embedded store
(:mod:`~slm.copy.backup`, ``slm backup``)."""
