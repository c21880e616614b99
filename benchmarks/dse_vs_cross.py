"""The DSE paper's online-efficiency experiment at our scale: one query against N candidates.

    python benchmarks/dse_vs_cross.py --stsb data/downloads/Stsbenchmark.tar.gz --n 100000

- cross-encoder: N forward passes over (query, candidate) pairs, the obvious alternative;
- DSE: candidate embeddings cached beforehand (timed separately, as the offline cost), then online one
  query encoding plus the head over the N cached embeddings.
Both models are the bundled MiniLM (the DSE head and the cross-encoder's head freshly initialised):
time does not depend on the weights' values. Candidates are N distinct synthetic sentences drawn from
STS Benchmark's word frequencies (see sampling_scale.py). Writes benchmarks/results/dse_vs_cross.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch
from sampling_scale import corpus  # run as a script: benchmarks/ is on sys.path

from pldistill.models.dse import DSE
from pldistill.models.encoders import CrossModel, native_bf16

QUERY = "A man is playing a guitar on the stage."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stsb", required=True)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--pooling", default="last4")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/dse_vs_cross.json")
    args = ap.parse_args()
    torch.manual_seed(0)
    cands = corpus(args.stsb, args.n, seed=0)

    dse = DSE.create("bundled:all-MiniLM-L6-v2", args.pooling, hidden=512)
    t0 = time.perf_counter()
    cached = dse.encode(cands, args.batch, progress=True)  # offline, once per candidate set
    offline = time.perf_counter() - t0
    online_runs = []
    for _ in range(args.repeat):  # short: take the median of several
        t0 = time.perf_counter()
        q = dse.encode([QUERY])[0]
        dse_scores = dse.score_cached(q, cached)
        online_runs.append(time.perf_counter() - t0)
    online = statistics.median(online_runs)

    cross = CrossModel.load("bundled:all-MiniLM-L6-v2")
    t0 = time.perf_counter()
    cross_scores = cross.logits([QUERY] * len(cands), cands, args.batch, progress=True)
    cross_s = time.perf_counter() - t0

    result = {
        "candidates": len(cands), "pooling": args.pooling, "embedding_dim": int(cached.shape[1]),
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else platform.processor() or "cpu",
        "threads": torch.get_num_threads(), "bf16": native_bf16(),
        "dse_online_runs_s": [round(t, 3) for t in online_runs],
        "cross_encoder_s": round(cross_s, 2), "dse_online_s": round(online, 3),
        "dse_offline_encode_s": round(offline, 1),
        "speedup_online": round(cross_s / online, 1),
        "speedup_including_encoding": round(cross_s / (online + offline), 2),
        "scored": [len(dse_scores), len(cross_scores)],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
