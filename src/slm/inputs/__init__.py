"""What a caller hands in, checked at the boundary before the engine acts on it: memories
to remember (:mod:`~slm.inputs.memories`: ``MemoryInput``), a conversation as chat APIs
shape it (:mod:`~slm.inputs.conversations`), and a recall's filters and channel names
(:mod:`~slm.inputs.recall`)."""
