import numpy as np
import pytest

from pldistill.pairs.semantic import neighbours
from pldistill.params.config import parse_params


def unit(n, dim=24, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def brute_force(emb, k):
    sims = emb @ emb.T  # (n, n): fine for a test-sized n
    np.fill_diagonal(sims, -np.inf)
    return [np.argsort(-row, kind="stable")[:k] for row in sims], sims


def semantic_params(**kw):
    return parse_params({"sample": {"semantic": kw}}).sample.semantic


@pytest.mark.parametrize("chunk", [7, 256])
@pytest.mark.parametrize("index", ["flat", "torch"])
def test_exact_faiss_top_k_equals_numpy_brute_force(chunk, index):
    emb = unit(500)
    expected, sims = brute_force(emb, 5)
    got = list(neighbours(emb, 5, semantic_params(index=index), seed=0, chunk=chunk, progress=False))
    assert [q for q, _, _ in got] == list(range(500))
    for (q, idx, val), exp in zip(got, expected):
        assert idx.tolist() == exp.tolist()
        np.testing.assert_allclose(val, sims[q, exp], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("index", ["flat", "torch"])
def test_a_sentence_is_never_its_own_neighbour_and_ties_go_to_the_lower_index(index):
    base = unit(20)
    emb = np.concatenate([base, base, base, base])  # every row has 3 exact copies, 20 apart
    for q, idx, _ in neighbours(emb, 2, semantic_params(index=index), seed=0, progress=False):
        copies = [c for c in range(q % 20, 80, 20) if c != q]
        assert idx.tolist() == copies[:2]  # cosine 1, the two lowest-indexed other copies


@pytest.mark.parametrize("index", ["ivf", "hnsw"])
def test_approximate_indexes_find_most_exact_neighbours(index):
    emb = unit(3000, dim=16, seed=1)
    exact, _ = brute_force(emb, 5)
    p = semantic_params(index=index, nlist=32, nprobe=8, hnsw_m=16, ef_search=64)
    got = {q: idx for q, idx, _ in neighbours(emb, 5, p, seed=0, progress=False)}
    recall = np.mean([len(set(got[q]) & set(exact[q])) / 5 for q in range(len(emb))])
    assert recall > 0.9, recall


@pytest.mark.parametrize("index", ["ivf", "hnsw"])
def test_approximate_search_is_reproducible(index):
    emb = unit(2000, dim=16, seed=2)
    p = semantic_params(index=index, nlist=16, nprobe=4)
    a = [idx.tolist() for _, idx, _ in neighbours(emb, 4, p, seed=3, progress=False)]
    b = [idx.tolist() for _, idx, _ in neighbours(emb, 4, p, seed=3, progress=False)]
    assert a == b
