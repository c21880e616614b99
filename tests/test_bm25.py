import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from pldistill.base.cleaning import tokenize
from pldistill.data import datasets
from pldistill.pairs.bm25 import BM25Index
from pldistill.pairs.sampling import unique_sentences
from pldistill.params.config import parse_params


def reference_top_k(ref: BM25Okapi, queries, k, exclude_self):
    """rank-bm25's scores, ranked (score desc, index asc), positive scores only."""
    out = []
    for i, q in enumerate(queries):
        s = ref.get_scores(q)
        if exclude_self:
            s[i] = -np.inf
        order = np.lexsort((np.arange(len(s)), -s))
        out.append([j for j in order[:k] if s[j] > 0])
    return out


@pytest.fixture(scope="module")
def demo_tokens():
    loaded = datasets.load(parse_params({}).data, 0)
    return [tokenize(s) for s in unique_sentences(loaded.splits["train"])]


def test_scores_equal_rank_bm25(demo_tokens):
    ours = BM25Index(demo_tokens)
    ref = BM25Okapi(demo_tokens)
    queries = [*demo_tokens[:50], ["the", "the", "cat"], ["zzz-not-in-vocab"], []]
    expected = np.array([ref.get_scores(q) for q in queries])
    np.testing.assert_allclose(ours.scores(queries), expected, rtol=1e-12, atol=1e-12)


def test_top_k_lists_match_rank_bm25(demo_tokens):
    ours = BM25Index(demo_tokens)
    ref = BM25Okapi(demo_tokens)
    got = [list(docs) for _, docs, _ in ours.top_k(demo_tokens, 5, exclude_self=True, chunk=64, progress=False)]
    assert got == reference_top_k(ref, demo_tokens, 5, exclude_self=True)


def test_idf_floor_for_common_terms():
    corpus = [["a", "b"], ["a", "c"], ["a", "d"], ["e"]]  # "a" in 3 of 4 docs: negative idf, floored
    ours, ref = BM25Index(corpus), BM25Okapi(corpus)
    np.testing.assert_allclose(ours.scores([["a"]])[0], ref.get_scores(["a"]), rtol=1e-12)
    assert ours.scores([["a"]])[0][0] > 0


def test_chunking_and_ties_are_deterministic():
    # six identical docs (a tie, broken by the lower index) among others that keep idf positive
    corpus = [["x", "y"]] * 6 + [[f"w{i}"] for i in range(10)]
    index = BM25Index(corpus)
    for chunk in (1, 3, 100):
        got = [list(d) for _, d, _ in index.top_k(corpus, 2, exclude_self=True, chunk=chunk, progress=False)]
        assert got[0] == [1, 2] and got[5] == [0, 1]


def test_no_overlap_gives_no_neighbours():
    index = BM25Index([["a"], ["b"], ["c"]])
    assert [len(d) for _, d, _ in index.top_k([["a"], ["b"]], 2, exclude_self=True, progress=False)] == [0, 0]
