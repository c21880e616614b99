"""A static student's speed against the whole transformer it came from, at several batch sizes, in turns.

Stage evaluate times every model at one batch size (``evaluate.batch_size``, 64 on a CPU). A transformer on a CPU
is about as fast at 64 as at any size, but a static model spends most of a batch of 64 on per-batch overhead
(tokeniser call, Python, module calls), so users of static models encode in larger batches (Model2Vec's default is
1,024). This times both models at each size, in turns (pldistill.ship.speed: each turn repeated until
``--min-seconds`` have gone, the ratio the median over rounds; the tokenizers library parallel, its default), and
the ratio of each model at its own best size (those measured in different turns).

    python benchmarks/static_speed.py --model models/bi --pairs data/clean/test.parquet
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from pldistill.base import schemas
from pldistill.base.device import cpu_flags
from pldistill.models.encoders import BiEncoder
from pldistill.ship import speed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the static student (a saved model directory)")
    ap.add_argument("--reference", default="bundled:all-MiniLM-L6-v2", help="the whole transformer")
    ap.add_argument("--pairs", required=True, type=Path, help="a cleaned split (Parquet, schema PAIRS)")
    ap.add_argument("--n", type=int, default=512, help="pairs scored per pass")
    ap.add_argument("--batch-sizes", default="64,256,1024")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-seconds", type=float, default=0.5)
    a = ap.parse_args()
    pairs = schemas.read(a.pairs, schemas.PAIRS).iloc[: a.n]
    s1, s2 = list(pairs["sentence1"]), list(pairs["sentence2"])
    static, whole = BiEncoder.load(a.model, 128), BiEncoder.load(a.reference, 128)
    print(f"cpu: {cpu_flags()}; torch threads {torch.get_num_threads()}; {len(pairs)} pairs a pass", flush=True)
    rows = {}
    for bs in (int(b) for b in a.batch_sizes.split(",")):
        got = speed.ratios(whole, {"static": static}, s1, s2, bs, False, a.rounds, a.min_seconds)["static"]
        rows[bs] = {"ratio": got["speed"], "static_pairs_per_s": got["pairs_per_s"],
                    "reference_pairs_per_s": got["reference_pairs_per_s"], "per_round": got["per_round"]}
        print(f"batch {bs}: static {got['pairs_per_s']} pairs/s, reference {got['reference_pairs_per_s']} pairs/s, "
              f"ratio {got['speed']} (rounds {got['per_round']})", flush=True)
    best_static = max(rows, key=lambda b: rows[b]["static_pairs_per_s"])
    best_ref = max(rows, key=lambda b: rows[b]["reference_pairs_per_s"])
    each_best = round(rows[best_static]["static_pairs_per_s"] / rows[best_ref]["reference_pairs_per_s"], 2)
    print(f"each at its best batch: static at {best_static}, reference at {best_ref}: {each_best}x")
    print(json.dumps({"batches": rows, "each_at_best": {"static_batch": best_static, "reference_batch": best_ref,
                                                         "ratio": each_best}}))


if __name__ == "__main__":
    main()
