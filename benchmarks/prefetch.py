"""Tokenising ahead of the model (pldistill.ahead) against tokenising in line, same model, inputs and backend, in
one run: labelling (cross-encoder), encoding (bi-encoder) and training steps (bi- and cross-encoder).

    OMP_NUM_THREADS=1 python benchmarks/prefetch.py --stsb data/downloads/Stsbenchmark.tar.gz --threads 1

"host s" is the time the model's thread spent on features (tokenising in line, or waiting for the worker): the
host-side work left on the critical path. On a CPU the model and the tokenizer share the cores, so the wall-clock
gain is at most the tokenizer's share of the work; on a GPU the model's share shrinks and the tokenizer's is what
is left. Outputs and trained weights must be equal both ways (checked). Rounds alternate in line / ahead, best
time kept. Printed: the CPU and its flags, torch threads, load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import torch
from label_throughput import cpu, stsb_pairs  # run as a script: benchmarks/ is on sys.path

from pldistill import datasets, pair_losses
from pldistill.config import DataParams, StudentParams
from pldistill.models import BiEncoder, CrossModel
from pldistill.training import Fit

MODEL = "bundled:all-MiniLM-L6-v2"


def timed(call, model, rounds: int) -> dict:
    """Best wall seconds, CPU seconds and host seconds of ``call`` in line (depth 0) and ahead, rounds alternating."""
    best = {d: {"wall": float("inf"), "cpu": float("inf"), "host": float("inf")} for d in ("in line", "ahead")}
    outs = {}
    for _ in range(rounds + 1):  # the first round warms up (and decides a backend's gate) and is not counted
        for name, depth in (("in line", 0), ("ahead", 2)):
            model.prefetch_depth, model.tokens.waited = depth, 0.0
            t0, c0 = time.perf_counter(), time.process_time()
            outs[name] = call()
            wall, cpu_s = time.perf_counter() - t0, time.process_time() - c0
            if _ > 0:
                b = best[name]
                b.update(wall=min(b["wall"], wall), cpu=min(b["cpu"], cpu_s), host=min(b["host"], model.tokens.waited))
    if not np.array_equal(outs["in line"], outs["ahead"]):
        raise SystemExit("outputs differ between in line and ahead: a bug")
    return best


def inference(kind: str, spec: str, pairs, backend: str, bs: int, rounds: int) -> dict:
    torch.manual_seed(0)
    model = (CrossModel if kind == "cross" else BiEncoder).load(spec, backend=backend)
    s1, s2 = list(pairs["sentence1"]), list(pairs["sentence2"])
    texts = list(dict.fromkeys(s1 + s2))
    call = (lambda: model.logits(s1, s2, bs, False)) if kind == "cross" else (lambda: model.encode(texts, bs, False))
    best = timed(call, model, rounds)
    n = len(s1) if kind == "cross" else len(texts)
    ran = model.choice.backend if model.choice else "torch"
    return {"kind": kind, "backend": ran, "items": n, **summary(best, n)}


def summary(best: dict, n: int) -> dict:
    a, b = best["in line"], best["ahead"]
    return {"in_line": {k: round(v, 3) for k, v in a.items()}, "ahead": {k: round(v, 3) for k, v in b.items()},
            "per_s": [round(n / a["wall"], 1), round(n / b["wall"], 1)], "ratio": round(a["wall"] / b["wall"], 3),
            "host_share_in_line": round(a["host"] / a["wall"], 4)}


def training(kind: str, data, steps: int, rounds: int) -> dict:
    """``steps`` steps of batch 16 on the first STS-B training pairs, no dev scoring; weights checked equal."""
    tp = StudentParams(model=MODEL, layers=None, batch_size=16, epochs=1, lr=2e-5, evals_per_epoch=1)
    s1, s2, y = list(data["sentence1"]), list(data["sentence2"]), data["score"].to_numpy()
    best = {d: {"wall": float("inf"), "cpu": float("inf"), "host": float("inf")} for d in ("in line", "ahead")}
    weights = {}
    for r in range(rounds + 1):
        for name in ("in line", "ahead"):
            torch.manual_seed(0)
            model = (CrossModel if kind == "cross" else BiEncoder).load(MODEL, tp.max_length)
            run = Fit(model.module, pair_losses.default(model), (s1, s2), y, lambda: 0.0, tp,
                      torch.Generator().manual_seed(0), desc=f"{kind} {name}",
                      prefetch=model.prefetch if name == "ahead" else None)
            model.tokens.waited = 0.0
            t0, c0 = time.perf_counter(), time.process_time()
            run.advance(steps)
            wall, cpu_s = time.perf_counter() - t0, time.process_time() - c0
            run.close()
            weights[name] = next(iter(model.module.state_dict().values())).clone()
            if r > 0:
                b = best[name]
                b.update(wall=min(b["wall"], wall), cpu=min(b["cpu"], cpu_s), host=min(b["host"], model.tokens.waited))
    if not torch.equal(weights["in line"], weights["ahead"]):
        raise SystemExit("weights differ between in line and ahead: a bug")
    return {"kind": kind, "steps": steps, **summary(best, steps)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stsb", required=True, help="the STS Benchmark archive (Stsbenchmark.tar.gz)")
    ap.add_argument("--cross", default=MODEL, help="cross-encoder to label with (default: MiniLM, new head)")
    ap.add_argument("--n", type=int, default=2500, help="pairs labelled (their distinct sentences encoded)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--backends", default="torch,openvino-int8", help="inference backends to compare on")
    ap.add_argument("--steps", type=int, default=40, help="training steps (batch 16)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    out = {"cpu": cpu(), "load_before": os.getloadavg(), "rows": []}
    print(json.dumps(out["cpu"]), flush=True)
    pairs = stsb_pairs(args.stsb, args.n, 0)
    for backend in args.backends.split(","):
        for kind, spec in (("cross", args.cross), ("bi", MODEL)):
            out["rows"].append(inference(kind, spec, pairs, backend, args.batch_size, args.rounds))
            print(json.dumps(out["rows"][-1]), flush=True)
    train = datasets.load(DataParams(dataset="stsb", source=args.stsb), 0).splits["train"].head(16 * args.steps)
    for kind in ("bi", "cross"):
        out["rows"].append(training(kind, train, args.steps, args.rounds))
        print(json.dumps(out["rows"][-1]), flush=True)
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))
    print("\n| what | backend | in line, per s | ahead, per s | ratio | host s on the critical path, in line → ahead "
          "| tokenizer's share in line |\n|---|---|---:|---:|---:|---|---:|")
    for r in out["rows"]:
        what = f"train {r['kind']} ({r['steps']} steps)" if "steps" in r else \
            f"{'label' if r['kind'] == 'cross' else 'encode'} ({r['items']})"
        print(f"| {what} | {r.get('backend', 'torch')} | {r['per_s'][0]} | {r['per_s'][1]} | {r['ratio']:.3f}x "
              f"| {r['in_line']['host']} → {r['ahead']['host']} | {r['host_share_in_line']:.1%} |")


if __name__ == "__main__":
    main()
