"""BM25 (Okapi) top-k retrieval over a sentence corpus, vectorised with scipy.sparse.

Scores equal rank-bm25's ``BM25Okapi`` for the same tokens (same idf floor ``epsilon * mean idf`` for
terms in more than half the documents), but a chunk of queries is scored by one sparse product
instead of a Python loop per query term, and no dense N x N matrix is ever held.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import scipy.sparse as sp
from tqdm.auto import tqdm


class BM25Index:
    def __init__(self, corpus: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.vocab: dict[str, int] = {}
        counts = self._counts(corpus, grow=True)  # (docs, vocab) term frequencies
        n_docs = counts.shape[0]
        self.doc_len = np.asarray(counts.sum(axis=1)).ravel().astype(np.float64)
        self.avgdl = self.doc_len.sum() / n_docs
        df = np.bincount(counts.indices, minlength=len(self.vocab)).astype(np.float64)
        idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
        idf[idf < 0] = self.epsilon * idf.mean()  # rank-bm25's floor for very common terms
        self.idf = idf
        # Precompute each (doc, term) weight: idf * tf (k1 + 1) / (tf + k1 (1 - b + b |d| / avgdl)).
        rows = np.repeat(np.arange(n_docs), np.diff(counts.indptr))
        tf = counts.data.astype(np.float64)
        norm = self.k1 * (1 - self.b + self.b * self.doc_len[rows] / self.avgdl)
        weights = idf[counts.indices] * tf * (self.k1 + 1) / (tf + norm)
        # Stored transposed (vocab, docs) so a query chunk (q, vocab) @ this gives (q, docs) scores.
        self.weights_t = sp.csr_matrix((weights, counts.indices, counts.indptr), shape=counts.shape).T.tocsr()

    def _counts(self, docs: Sequence[Sequence[str]], grow: bool) -> sp.csr_matrix:
        indptr, indices = [0], []
        for doc in docs:
            for tok in doc:
                j = self.vocab.get(tok)
                if j is None:
                    if not grow:
                        continue  # a query term no document has scores 0, as in rank-bm25
                    j = self.vocab[tok] = len(self.vocab)
                indices.append(j)
            indptr.append(len(indices))
        data = np.ones(len(indices), dtype=np.float64)
        m = sp.csr_matrix((data, np.asarray(indices, dtype=np.int64), np.asarray(indptr)),
                          shape=(len(docs), len(self.vocab)))
        m.sum_duplicates()  # repeated tokens become counts
        return m

    def scores(self, queries: Sequence[Sequence[str]]) -> np.ndarray:
        """Dense (len(queries), n_docs) scores; keep ``len(queries)`` small for a large corpus."""
        return (self._counts(queries, grow=False) @ self.weights_t).toarray()

    def top_k(
        self, queries: Sequence[Sequence[str]], k: int, exclude_self: bool = False, chunk: int = 256,
        progress: bool = True,
    ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """Yield (query index, doc indices, scores) of the ``k`` best positive-scoring docs per query.

        Ties are broken by the lower doc index so results are reproducible. With ``exclude_self`` the
        queries are the corpus itself and query i never retrieves doc i. Memory: one dense
        (chunk, n_docs) float64 block at a time.
        """
        n = len(queries)
        bar = tqdm(total=n, desc="bm25 top-k", unit="query", disable=not progress)
        for start in range(0, n, chunk):
            block = self.scores(queries[start : start + chunk])  # (chunk, docs)
            if exclude_self:
                rows = np.arange(block.shape[0])
                block[rows, start + rows] = -np.inf
            for r, (idx, val) in enumerate(_rowwise_top_k(block, k)):
                yield start + r, idx, val
            bar.update(block.shape[0])
        bar.close()


def _rowwise_top_k(block: np.ndarray, k: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    k_eff = min(k, block.shape[1])
    if k_eff == 0:
        for _ in range(block.shape[0]):
            yield np.empty(0, np.int64), np.empty(0)
        return
    # The k-th best value of each row; everything >= it is a candidate (ties included), then an
    # exact (score desc, index asc) sort of the few candidates decides.
    kth = -np.partition(-block, k_eff - 1, axis=1)[:, k_eff - 1]
    for row, thr in zip(block, kth):
        cand = np.flatnonzero((row >= thr) & (row > 0))
        order = np.lexsort((cand, -row[cand]))[:k_eff]
        yield cand[order], row[cand[order]]
