"""bf16 autocast against fp32 on this CPU: the probe `bf16: auto` decides by, and a real encode, timed in turns.

`bf16: auto` turns autocast on only where the CPU has native bf16 units (amx_bf16 / avx512_bf16) *and* a bf16
matmul runs at least ``BF16_MARGIN`` times faster than fp32's (pldistill.base.device.bf16_auto). This prints the
flags, the probe's speed-up, and the speed-up of encoding real sentences with a whole model, fp32 and bf16
autocast in alternating rounds (the median of the per-round ratios), so the probe can be checked against the
work it stands for. The store's kept decision is neither read nor written.

    python benchmarks/bf16_auto.py --sentences data/embed/teacher.parquet
    python benchmarks/bf16_auto.py --sentences data/clean/test.parquet --n 2048 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch

from pldistill.base.device import BF16_MARGIN, bf16_speedup, cpu_flags, native_bf16
from pldistill.models.encoders import BiEncoder


def sentences(path: Path, n: int) -> list[str]:
    """The first ``n`` distinct sentences of a Parquet file with a ``sentence`` column (data/embed/teacher.parquet)
    or ``sentence1`` / ``sentence2`` columns (a cleaned split)."""
    names = pq.read_schema(path).names
    cols = ["sentence"] if "sentence" in names else [c for c in ("sentence1", "sentence2") if c in names]
    if not cols:
        raise SystemExit(f"{path}: expected a column sentence, or sentence1 and sentence2; found {', '.join(names)}")
    table = pq.read_table(path, columns=cols)
    seen = dict.fromkeys(s for c in cols for s in table.column(c).to_pylist())
    return list(seen)[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", required=True, type=Path)
    ap.add_argument("--model", default="bundled:all-MiniLM-L6-v2")
    ap.add_argument("--n", type=int, default=4096, help="sentences encoded per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    a = ap.parse_args()
    texts = sentences(a.sentences, a.n)
    print(json.dumps({"cpu": cpu_flags(), "native_bf16": native_bf16(), "torch": torch.__version__,
                      "torch_threads": torch.get_num_threads()}), flush=True)
    probe = bf16_speedup()
    print(f"probe: bf16 matmul at {probe:.2f}x fp32's speed -> bf16 auto would be "
          f"{'on' if native_bf16() and probe >= BF16_MARGIN else 'off'} (on at >= {BF16_MARGIN}x with native units)",
          flush=True)
    model = BiEncoder.load(a.model)
    model.encode(texts[:256], a.batch_size, False)  # warm-up
    model.encode(texts[:256], a.batch_size, True)
    seconds: dict[bool, list[float]] = {False: [], True: []}
    emb: dict[bool, np.ndarray] = {}
    for r in range(a.rounds):
        for bf16 in (False, True):
            t0 = time.perf_counter()
            emb[bf16] = model.encode(texts, a.batch_size, bf16)
            seconds[bf16].append(time.perf_counter() - t0)
        print(f"round {r + 1}: fp32 {len(texts) / seconds[False][-1]:.0f} sent/s, "
              f"bf16 {len(texts) / seconds[True][-1]:.0f} sent/s", flush=True)
    ratio = statistics.median(f / b for f, b in zip(seconds[False], seconds[True]))
    cosine = np.sum(emb[False] * emb[True], axis=1)  # both unit length
    print(json.dumps({"sentences": len(texts), "batch_size": a.batch_size, "rounds": a.rounds,
                      "fp32_sent_per_s": round(len(texts) / statistics.median(seconds[False]), 1),
                      "bf16_sent_per_s": round(len(texts) / statistics.median(seconds[True]), 1),
                      "bf16_speedup_encode": round(ratio, 3), "bf16_speedup_probe": round(probe, 3),
                      "min_cosine_bf16_vs_fp32": round(float(cosine.min()), 5)}, indent=2))


if __name__ == "__main__":
    main()
