"""AdamW's for-loop kernel against its fused one (``train.optimizer`` adamw / adamw-fused), on the steps stage
gold and stage distill take: the demo's default student (the bundled MiniLM cut to ``--layers``) learning the
demo's training pairs by cosine MSE, batch 16. The same update up to float rounding; this times it.

    python benchmarks/optimizer_step.py --layers 4,5 --steps 40 --rounds 3

Each round trains a fresh copy under each kernel in turn (``--steps`` steps each, the first 5 not timed), so a
machine shared with other jobs slows both alike; prints CPU flags and threads, the forward, backward and
optimizer milliseconds of a step (medians over rounds) and the ratio of the whole step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import pandas as pd
import torch

from pldistill import datasets, pair_losses
from pldistill.config import StepParams
from pldistill.device import cpu_flags
from pldistill.loop import _optimizer
from pldistill.models import BiEncoder


def timed_steps(layers: tuple[int, ...], optimizer: str, s1: list[str], s2: list[str], y: torch.Tensor,
                steps: int, batch: int) -> dict[str, float]:
    torch.manual_seed(0)
    model = BiEncoder.load("bundled:all-MiniLM-L6-v2", 128, False, layers)
    module = model.module
    step = StepParams(epochs=1, batch_size=16, lr=1e-4, warmup=0.1, max_length=128, evals_per_epoch=1,
                      optimizer=optimizer)  # the demo student's settings; weight decay off biases and LayerNorm
    opt = _optimizer(module, step, {})
    module.train()
    took = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}
    for i in range(steps):
        a = slice(i * batch % (len(y) - batch), i * batch % (len(y) - batch) + batch)
        t0 = time.perf_counter()
        loss = pair_losses.cosine_mse(model)((s1[a], s2[a]), y[a])
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if i >= 5:
            for k, dt in zip(took, (t1 - t0, t2 - t1, t3 - t2)):
                took[k] += dt * 1000 / (steps - 5)
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="4,5", help="the layers the student keeps (the demo's cut: 4,5)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    df = pd.read_csv(datasets.DEMO_PATH, sep="\t", quoting=3)  # the demo's own file, read plainly
    df = df[df["split"] == "train"]
    s1, s2 = list(df["sentence1"]), list(df["sentence2"])
    y = torch.tensor(df["score"].to_numpy() / 5.0, dtype=torch.float32)
    layers = tuple(int(x) for x in a.layers.split(","))
    print(f"cpu: {cpu_flags()}; torch threads {torch.get_num_threads()}; layers {layers}, batch {a.batch}", flush=True)
    runs: dict[str, list[dict]] = {"adamw": [], "adamw-fused": []}
    for r in range(a.rounds):
        for name in runs:
            runs[name].append(timed_steps(layers, name, s1, s2, y, a.steps, a.batch))
            t = runs[name][-1]
            print(f"round {r + 1} {name}: " + ", ".join(f"{k} {v:.0f} ms" for k, v in t.items())
                  + f", step {sum(t.values()):.0f} ms", flush=True)
    med = {name: {k: round(statistics.median(t[k] for t in ts), 1) for k in ts[0]} for name, ts in runs.items()}
    step = {name: sum(m.values()) for name, m in med.items()}
    ratio = round(step["adamw"] / step["adamw-fused"], 2)
    print(f"median step: adamw {step['adamw']:.0f} ms, adamw-fused {step['adamw-fused']:.0f} ms: {ratio}x; "
          f"optimizer alone {med['adamw']['optimizer'] / med['adamw-fused']['optimizer']:.1f}x")
    print(json.dumps({"cpu": cpu_flags(), "median_ms": med, "step_ratio": ratio}))


if __name__ == "__main__":
    main()
