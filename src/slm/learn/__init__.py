"""Learning from use: the reranker's features, the linear ranking model, reranking a
recall, and a profile's learning from its own feedback (docs/learning.md).

    features    the numbers recall already knows about each candidate of its window
    model       the linear pairwise ranker: fit, score, read and write its JSON
    rerank      reorder one recall's window by a model's scores
    adapt       a profile's feedback, its learned model and the guard rails around it
"""
