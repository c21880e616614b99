"""BM25 and exact semantic top-k over a large corpus: time and peak memory, each next to the obvious
alternative in the same run.

    python benchmarks/sampling_scale.py --stsb data/downloads/Stsbenchmark.tar.gz --n 200000 --top-k 5

The corpus is ``--n`` distinct synthetic sentences drawn word by word from STS Benchmark's word
frequencies (lengths from its sentence lengths), so token statistics are real and no sentence repeats.
Each measurement runs in its own subprocess so its peak RSS (``ru_maxrss``) is its own:
- ``bm25``: our chunked sparse BM25 over every sentence as a query; vs rank-bm25 on a query sample
  (extrapolated: rank-bm25 would take hours on all of them).
- ``encode``: the bundled MiniLM embedding the first ``--encode-n`` sentences (what semantic sampling
  pays first; linear in n, so the full cost is extrapolated from this throughput).
- ``torch``: the same through our torch exact path (``sample.semantic.index: torch``).
- ``faiss``: exact (flat inner product) top-k of all ``--n`` rows, 4096 queries per search call; vs
  ``st``: sentence-transformers' ``util.semantic_search`` (torch matmul + topk, the obvious
  alternative) on the same rows; neighbour lists compared row by row. The rows are the real embeddings from
  ``encode`` followed by random unit vectors up to ``--n``: an exact search's time and memory do not
  depend on the values, and encoding 200,000 sentences on 2 CPU cores would take most of an hour.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

OUT = Path("benchmarks/results/scale")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def corpus(stsb: str, n: int, seed: int) -> list[str]:
    from pldistill.base.cleaning import tokenize
    from pldistill.data import datasets
    from pldistill.params.config import parse_params

    loaded = datasets.load(parse_params({"data": {"dataset": "stsb", "source": stsb}}).data, 0)
    real = [s for df in loaded.splits.values() for col in ("sentence1", "sentence2") for s in df[col]]
    counts = Counter(t for s in real for t in tokenize(s))
    words = np.array(list(counts))
    p = np.array(list(counts.values()), dtype=np.float64)
    p /= p.sum()
    lengths = np.array([len(tokenize(s)) for s in real])
    rng = np.random.default_rng(seed)
    out: dict[str, None] = {}
    while len(out) < n:
        for L in rng.choice(lengths, size=n - len(out)):
            out[" ".join(rng.choice(words, size=max(int(L), 2), p=p))] = None
    return list(out)[:n]


def run_bm25(sentences: list[str], k: int, chunk: int) -> dict:
    from rank_bm25 import BM25Okapi

    from pldistill.base.cleaning import tokenize
    from pldistill.pairs.bm25 import BM25Index

    tokens = [tokenize(s) for s in sentences]
    base = peak_mb()
    t0 = time.perf_counter()
    index = BM25Index(tokens)
    hits = [d for _, d, _ in index.top_k(tokens, k, exclude_self=True, chunk=chunk)]
    ours = time.perf_counter() - t0
    ours_peak = peak_mb()
    sample = 100  # rank-bm25: a Python loop over query terms per query; time a sample, extrapolate
    t0 = time.perf_counter()
    ref = BM25Okapi(tokens)
    t_index = time.perf_counter() - t0
    t0 = time.perf_counter()
    same = 0
    for i in range(sample):
        s = ref.get_scores(tokens[i])
        s[i] = -np.inf
        order = [int(j) for j in np.lexsort((np.arange(len(s)), -s))[:k] if s[j] > 0]
        same += order == hits[i].tolist()
    per_query = (time.perf_counter() - t0) / sample
    rank_total = t_index + per_query * len(tokens)
    return {"sentences": len(sentences), "top_k": k, "query_chunk": chunk, "ours_s": round(ours, 1),
            "ours_peak_rss_mb": round(ours_peak), "rss_before_mb": round(base),
            "rank_bm25_extrapolated_s": round(rank_total), "rank_bm25_sampled_queries": sample,
            "identical_on_sample": same, "speedup": round(rank_total / ours, 1)}


def run_encode(sentences: list[str], batch: int, n_total: int, seed: int) -> dict:
    from pldistill.models.encoders import BiEncoder

    model = BiEncoder.load("bundled:all-MiniLM-L6-v2")
    base = peak_mb()
    t0 = time.perf_counter()
    emb = model.encode(sentences, batch, bf16="auto", progress=True)
    seconds = time.perf_counter() - t0
    OUT.mkdir(parents=True, exist_ok=True)
    pad = np.random.default_rng(seed).standard_normal((n_total - len(emb), emb.shape[1])).astype(np.float32)
    pad /= np.linalg.norm(pad, axis=1, keepdims=True)
    np.save(OUT / "emb.npy", np.concatenate([emb, pad]))
    return {"sentences": len(sentences), "dim": emb.shape[1], "encode_s": round(seconds, 1),
            "sentences_per_s": round(len(sentences) / seconds), "peak_rss_mb": round(peak_mb()),
            "rss_before_mb": round(base)}


def run_faiss(k: int, chunk: int, method: str) -> dict:
    from pldistill.pairs.semantic import neighbours
    from pldistill.params.config import parse_params

    emb = np.load(OUT / "emb.npy")
    base = peak_mb()
    t0 = time.perf_counter()
    if method in ("faiss", "torch"):  # our neighbours() with index flat (faiss) or torch
        p = parse_params({"sample": {"semantic": {"index": "flat" if method == "faiss" else "torch"}}}).sample.semantic
        ids = np.stack([d for _, d, _ in neighbours(emb, k, p, seed=0, chunk=p.search_chunk)])
    else:  # sentence-transformers' exact search (torch), self hit dropped the same way
        import torch
        from sentence_transformers.util import semantic_search

        t = torch.from_numpy(emb)
        hits = semantic_search(t, t, query_chunk_size=chunk, top_k=k + 1)
        ids = np.array([[h["corpus_id"] for h in row if h["corpus_id"] != q][:k] for q, row in enumerate(hits)])
    seconds = time.perf_counter() - t0
    np.save(OUT / f"ids-{method}.npy", ids)
    return {"method": method, "sentences": len(emb), "top_k": k, "query_chunk": chunk, "search_s": round(seconds, 1),
            "peak_rss_mb": round(peak_mb()), "rss_before_mb": round(base)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stsb", required=True)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--encode-n", type=int, default=20_000)
    ap.add_argument("--only", choices=["bm25", "encode", "faiss", "torch", "st"])
    ap.add_argument("--steps", default="bm25,encode,faiss,st", help="comma-separated; others kept from summary.json")
    args = ap.parse_args()
    if args.only:  # child process: one measurement
        if args.only in ("faiss", "torch", "st"):
            res = run_faiss(args.top_k, args.chunk, args.only)
        else:
            sentences = corpus(args.stsb, args.n, args.seed)
            res = (run_bm25(sentences, args.top_k, args.chunk) if args.only == "bm25"
                   else run_encode(sentences[: args.encode_n], 128, args.n, args.seed))
        print("RESULT " + json.dumps(res), flush=True)
        return
    summary = OUT / "summary.json"
    results = json.loads(summary.read_text()) if summary.is_file() else {}
    for what in filter(None, args.steps.split(",")):
        cmd = [sys.executable, __file__, "--stsb", args.stsb, "--n", str(args.n), "--top-k", str(args.top_k),
               "--chunk", str(args.chunk), "--seed", str(args.seed), "--encode-n", str(args.encode_n), "--only", what]
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        results[what] = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
        print(json.dumps(results[what]), flush=True)
        summary.write_text(json.dumps(results, indent=2) + "\n")  # after each step: a long run keeps its parts
    for other in ("st", "torch"):  # each exact alternative against faiss flat, row by row
        if {"faiss", other} <= set(results):
            a, b = np.load(OUT / "ids-faiss.npy"), np.load(OUT / f"ids-{other}.npy")
            results[f"faiss_vs_{other}"] = {
                "identical_rows": int((a == b).all(axis=1).sum()), "rows": len(a),
                f"{other}_time_over_faiss_time": round(results[other]["search_s"] / results["faiss"]["search_s"], 2)}
            print(json.dumps(results[f"faiss_vs_{other}"]))
    summary.write_text(json.dumps(results, indent=2) + "\n")

if __name__ == "__main__":
    main()
