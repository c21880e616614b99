"""Encode speed of a pruned student against its whole starting model, timed in turns in one process.

The two models encode the same sentences (the unique sentences of a cleaned split) in alternating rounds,
so a load change on the machine hits both; the median of the per-round ratios is the speed-up. Prints the CPU
flags (bf16 units or not), the thread count, every round, and the median and best of each.

``--floor`` also times the model with none of its transformer layers: what every encode pays whatever the depth
(tokeniser, embedding layer, pooling, normalising). From it, the per-layer cost and the speed-up that keeping
``--layers`` can reach at most (Amdahl: whole time / (floor + kept layers x per-layer time)).

    python benchmarks/encode_speed.py --pairs data/clean/test.parquet
    python benchmarks/encode_speed.py --pairs /tmp/fast/base/data/clean/test.parquet --layers 0,2,4 --rounds 9 --floor
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from pldistill.base import schemas
from pldistill.base.device import cpu_flags
from pldistill.models.encoders import BiEncoder, native_bf16


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", required=True, type=Path, help="a cleaned split (Parquet, schema PAIRS)")
    ap.add_argument("--model", default="bundled:all-MiniLM-L6-v2")
    ap.add_argument("--layers", default="0,2,4", help="the student's layers, kept from --model")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--floor", action="store_true", help="also time the model with no transformer layer")
    a = ap.parse_args()
    pairs = schemas.read(a.pairs, schemas.PAIRS)
    sentences = list(dict.fromkeys([*pairs["sentence1"], *pairs["sentence2"]]))
    layers = tuple(int(x) for x in a.layers.split(","))
    models = {"whole": BiEncoder.load(a.model, a.max_length),
              "pruned": BiEncoder.load(a.model, a.max_length, layers=layers)}
    if a.floor:
        models["floor"] = BiEncoder.load(a.model, a.max_length, layers=())
    print(json.dumps({"cpu": cpu_flags(), "native_bf16": native_bf16(), "torch_threads": torch.get_num_threads(),
                      "sentences": len(sentences), "layers": list(layers), "batch_size": a.batch_size}))
    for m in models.values():  # warm-up: allocator, kernels
        m.encode(sentences[: a.batch_size], a.batch_size, False)
    rates: dict[str, list[float]] = {name: [] for name in models}
    for r in range(a.rounds):
        for name, m in models.items():  # in turns: a load change hits both
            t0 = time.perf_counter()
            m.encode(sentences, a.batch_size, False)
            rates[name].append(len(sentences) / (time.perf_counter() - t0))
        print(f"round {r + 1}: " + ", ".join(f"{n} {v[-1]:.1f} sentences/s" for n, v in rates.items()), flush=True)
    med = {n: statistics.median(v) for n, v in rates.items()}
    print(json.dumps({"median_sentences_per_s": {n: round(v, 1) for n, v in med.items()},
                      "best_sentences_per_s": {n: round(max(v), 1) for n, v in rates.items()},
                      "speedup_median": round(med["pruned"] / med["whole"], 2),
                      # each round's pruned/whole ratio (the two ran back to back), and their median
                      "speedup_per_round": [round(p / w, 2) for p, w in zip(rates["pruned"], rates["whole"])],
                      "speedup_paired_median": round(statistics.median(
                          p / w for p, w in zip(rates["pruned"], rates["whole"])), 2),
                      "speedup_best": round(max(rates["pruned"]) / max(rates["whole"]), 2)}))
    if a.floor:
        total = models["whole"].model[0].auto_model.config.num_hidden_layers
        print(json.dumps(amdahl(len(sentences), med, len(layers), total)))


def amdahl(n: int, rate: dict[str, float], kept: int, total: int) -> dict[str, float]:
    """Seconds per encode of the no-layer model (the floor) and per layer, and the speed-up ``kept`` of ``total``
    layers can reach at most, from the median rates (sentences/s) of "whole" and "floor"."""
    whole, floor = n / rate["whole"], n / rate["floor"]
    per_layer = (whole - floor) / total
    return {"floor_s": round(floor, 3), "per_layer_s": round(per_layer, 3), "whole_s": round(whole, 3),
            "floor_share_of_whole": round(floor / whole, 3),
            "speedup_bound": round(whole / (floor + kept * per_layer), 2)}


if __name__ == "__main__":
    main()
