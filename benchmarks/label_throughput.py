"""Teacher labelling throughput: our labeller vs sentence_transformers.CrossEncoder.predict, same model
and pairs, in one run (each timed twice after a warm-up; the better time counts).

    python benchmarks/label_throughput.py --model models/teacher --pairs data/pairs/candidates.parquet --n 2000
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from pldistill import schemas
from pldistill.models import CrossModel, native_bf16


def best_time(fn, reps: int = 2) -> tuple[float, np.ndarray]:
    best, out = float("inf"), None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--pairs", required=True)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    df = schemas.read(args.pairs, schemas.CANDIDATES).head(args.n)
    s1, s2 = list(df["sentence1"]), list(df["sentence2"])
    m = CrossModel.load(args.model)
    m.logits(s1[:64], s2[:64], args.batch_size, False)  # warm-up
    rows = {}
    t, ref = best_time(lambda: m.model.predict(list(zip(s1, s2)), batch_size=args.batch_size,
                                               activation_fn=torch.nn.Identity(), show_progress_bar=False))
    rows["CrossEncoder.predict fp32"] = len(s1) / t
    t, ours = best_time(lambda: m.logits(s1, s2, args.batch_size, False))
    rows["ours fp32"] = len(s1) / t
    t, ours16 = best_time(lambda: m.logits(s1, s2, args.batch_size, True), reps=1)
    rows["ours bf16 autocast"] = len(s1) / t
    base = rows["CrossEncoder.predict fp32"]
    print(json.dumps({
        "pairs": len(s1), "batch_size": args.batch_size, "threads": torch.get_num_threads(),
        "native_bf16": native_bf16(),
        "pairs_per_s": {k: round(v, 1) for k, v in rows.items()},
        "ratio_vs_predict": {k: round(v / base, 2) for k, v in rows.items()},
        "max_abs_logit_diff_fp32": float(np.abs(ours - np.asarray(ref)).max()),
        "max_abs_logit_diff_bf16": float(np.abs(ours16 - ours).max()),
    }, indent=2))


if __name__ == "__main__":
    main()
