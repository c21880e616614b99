"""BM25 top-k: our sparse implementation vs rank-bm25's BM25Okapi on every unique sentence of a dataset.

    python benchmarks/bm25_vs_rank_bm25.py --stsb data/downloads/Stsbenchmark.tar.gz --top-k 3

Checks the top-k lists are identical (ties broken by lower index, positive scores only) and reports
each side's wall time and the ratio.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from rank_bm25 import BM25Okapi
from tqdm.auto import tqdm

from pldistill.base.cleaning import tokenize
from pldistill.data import datasets
from pldistill.pairs.bm25 import BM25Index
from pldistill.params.config import parse_params


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stsb", required=True)
    ap.add_argument("--top-k", type=int, default=3)
    args = ap.parse_args()
    loaded = datasets.load(parse_params({"data": {"dataset": "stsb", "source": args.stsb}}).data, 0)
    sentences = list(dict.fromkeys(s for df in loaded.splits.values()
                                   for col in ("sentence1", "sentence2") for s in df[col]))
    tokens = [tokenize(s) for s in sentences]
    k = args.top_k

    t0 = time.perf_counter()
    ours = [d.tolist() for _, d, _ in BM25Index(tokens).top_k(tokens, k, exclude_self=True)]
    t_ours = time.perf_counter() - t0

    t0 = time.perf_counter()
    ref = BM25Okapi(tokens)
    theirs = []
    for i, q in enumerate(tqdm(tokens, desc="rank-bm25", mininterval=5)):
        s = ref.get_scores(q)
        s[i] = -np.inf
        order = np.lexsort((np.arange(len(s)), -s))[:k]
        theirs.append([int(j) for j in order if s[j] > 0])
    t_ref = time.perf_counter() - t0

    mismatches = sum(a != b for a, b in zip(ours, theirs))
    print(json.dumps({"sentences": len(sentences), "top_k": k, "identical_lists": len(ours) - mismatches,
                      "mismatches": mismatches, "ours_s": round(t_ours, 2), "rank_bm25_s": round(t_ref, 1),
                      "speedup": round(t_ref / t_ours, 1)}, indent=2))


if __name__ == "__main__":
    main()
