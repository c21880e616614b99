"""Pair sampling: the strategies behind one registry (sampling), sparse BM25 (bm25) and nearest neighbours (semantic).
It may import base and params. Nothing is imported here."""
