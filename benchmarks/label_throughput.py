"""Labelling and encoding throughput per inference backend (pldistill.models.accel) against sentence-transformers' own
fp32 calls, same model and inputs, in one run:

- cross: ``CrossEncoder.predict`` fp32 vs our ``CrossModel.logits`` on torch (fp32, and bf16 where the CPU has
  native bf16 units), onnx, onnx-int8, openvino (and openvino-bf16 there);
- bi: ``SentenceTransformer.encode`` fp32 vs our ``BiEncoder.encode`` on each backend.

    python benchmarks/label_throughput.py --cross /tmp/accel/cross-minilm-b --stsb data/downloads/Stsbenchmark.tar.gz

Inputs: ``--n`` real STS Benchmark pairs (dev + test, shuffled with ``--seed``: mixed lengths); the bi-encoder
encodes their distinct sentences. Each row runs ``--rounds`` times, rounds interleaved (a neighbour's load hits
every row alike), after one warm-up; the best time counts, wall clock and CPU time (with ``--threads 1``, CPU
time is the work itself, whatever else runs on the machine). Quality is measured on the whole input against the
fp32 reference: cross, the Spearman of the labels (logits; sigmoid keeps the order); bi, the Spearman of the
pairs' cosines (a bi-encoder's labels). "gate" is what pldistill.models.accel decides on its 512-item sample.
Printed: the CPU (model, flags that matter, cores), torch threads, load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy.stats import spearmanr

from pldistill.data.datasets import load
from pldistill.models import accel
from pldistill.models.encoders import BiEncoder, CrossModel, native_bf16
from pldistill.params.data import DataParams

FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def cpu() -> dict:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    name = re.search(r"model name\s*:\s*(.*)", text)
    flags = set(re.search(r"flags\s*:\s*(.*)", text).group(1).split()) if "flags" in text else set()
    return {"model": name.group(1) if name else platform.processor(), "cores": os.cpu_count(),
            "flags": {f: f in flags for f in FLAGS}, "native_bf16": native_bf16(),
            "torch_threads": torch.get_num_threads()}


def stsb_pairs(archive: str, n: int, seed: int) -> pd.DataFrame:
    splits = load(DataParams(dataset="stsb", source=archive), seed).splits
    both = pd.concat([splits["dev"], splits["test"]], ignore_index=True)
    return both.sample(frac=1, random_state=seed).head(n).reset_index(drop=True)


def timed(rows: dict[str, Callable[[], np.ndarray]], rounds: int
          ) -> tuple[dict[str, float], dict[str, float], dict[str, np.ndarray]]:
    """Best wall and best CPU seconds (this process, all its threads) and the output per row, rounds interleaved,
    after a warm-up of each. With one thread, CPU time is the work itself, whatever the neighbours' load."""
    wall, cpu_s, outs = {k: float("inf") for k in rows}, {k: float("inf") for k in rows}, {}
    for k, fn in rows.items():
        outs[k] = fn()
    for _ in range(rounds):
        for k, fn in rows.items():
            t0, c0 = time.perf_counter(), time.process_time()
            outs[k] = fn()
            wall[k] = min(wall[k], time.perf_counter() - t0)
            cpu_s[k] = min(cpu_s[k], time.process_time() - c0)
    return wall, cpu_s, outs


def forwards(model: CrossModel | BiEncoder, probe: accel.Probe, cache: Path) -> dict[str, accel.Forward | str]:
    """Each installed backend's forward, built without the gate (so a failing one is measured too)."""
    out: dict[str, accel.Forward | str] = {}
    for backend in (*accel.CPU_BACKENDS, *(accel.BF16_BACKENDS if native_bf16() else ())):
        try:
            out[backend] = accel.forward(backend, model.model, probe, cache)
        except accel.BackendError as err:
            out[backend] = str(err)
    return out


def gate(ref: np.ndarray, out: np.ndarray) -> str:
    rho = accel.spearman(ref, out)
    return f"{'pass' if rho >= accel.GATE_SPEARMAN else 'FAIL'} ({rho:.5f})"


def bench_cross(spec: str, pairs: pd.DataFrame, bs: int, rounds: int, cache: Path) -> dict:
    m = CrossModel.load(spec)
    s1, s2 = list(pairs["sentence1"]), list(pairs["sentence2"])
    idx = accel.gate_sample(len(s1))
    a, b = [s1[i] for i in idx], [s2[i] for i in idx]
    fwds = forwards(m, lambda: m._features(a[:4], b[:4]), cache)
    rows: dict[str, Callable[[], np.ndarray]] = {
        "ST CrossEncoder.predict fp32": lambda: np.asarray(m.model.predict(
            list(zip(s1, s2)), batch_size=bs, activation_fn=torch.nn.Identity(), show_progress_bar=False)),
        "ours torch fp32": lambda: m._infer(s1, s2, bs, False, False),
    }
    if native_bf16():
        rows["ours torch bf16"] = lambda: m._infer(s1, s2, bs, True, False)
    rows.update({f"ours {k}": (lambda f=f: m._infer(s1, s2, bs, False, False, f))
                 for k, f in fwds.items() if callable(f)})
    best, cpu_s, outs = timed(rows, rounds)
    key = "ST CrossEncoder.predict fp32"
    base, ref = best[key], outs[key]
    table = {k: {"per_s": round(len(s1) / t, 1), "ratio": round(base / t, 2),
                 "per_cpu_s": round(len(s1) / cpu_s[k], 1), "ratio_cpu": round(cpu_s[key] / cpu_s[k], 2),
                 "spearman": round(float(spearmanr(ref, outs[k])[0]), 5),
                 "max_abs_logit_diff": float(np.abs(outs[k] - ref).max()),
                 "gate": "reference" if k.startswith("ST") else
                 ("not gated (torch)" if k == "ours torch fp32" else gate(ref[idx], outs[k][idx]))}
             for k, t in best.items()}
    m.use_backend("auto")
    accel.AUTO_MIN = 0  # auto decides on this input as it would on one of stage label's 16,384-pair chunks
    t0 = time.perf_counter()
    m.logits(s1, s2, bs, "auto")  # the first call decides (each backend timed on the gate sample), then labels
    first = time.perf_counter() - t0
    return {"model": spec, "pairs": len(s1), "rows": table,
            "skipped": {k: v for k, v in fwds.items() if not callable(v)},
            "auto": m.choice.describe(), "auto_first_call_s": round(first, 1)}


def bench_bi(spec: str, pairs: pd.DataFrame, bs: int, rounds: int, cache: Path) -> dict:
    m = BiEncoder.load(spec)
    texts = list(dict.fromkeys([*pairs["sentence1"], *pairs["sentence2"]]))
    pos = {t: i for i, t in enumerate(texts)}
    i1, i2 = [pos[t] for t in pairs["sentence1"]], [pos[t] for t in pairs["sentence2"]]
    sample = [texts[i] for i in accel.gate_sample(len(texts))]
    fwds = forwards(m, lambda: m._features(sample[:4]), cache)
    rows: dict[str, Callable[[], np.ndarray]] = {
        "ST SentenceTransformer.encode fp32": lambda: m.model.encode(
            texts, batch_size=bs, normalize_embeddings=True, show_progress_bar=False),
        "ours torch fp32": lambda: m._encode(texts, bs, False, False),
    }
    if native_bf16():
        rows["ours torch bf16"] = lambda: m._encode(texts, bs, True, False)
    rows.update({f"ours {k}": (lambda f=f: m._encode(texts, bs, False, False, f))
                 for k, f in fwds.items() if callable(f)})
    best, cpu_s, outs = timed(rows, rounds)
    unit = {k: v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12) for k, v in outs.items()}
    cos = {k: np.sum(v[i1] * v[i2], axis=1) for k, v in unit.items()}  # each pair's label
    base, key = best["ST SentenceTransformer.encode fp32"], "ST SentenceTransformer.encode fp32"
    gidx = accel.gate_sample(len(texts))
    table = {k: {"per_s": round(len(texts) / t, 1), "ratio": round(base / t, 2),
                 "per_cpu_s": round(len(texts) / cpu_s[k], 1), "ratio_cpu": round(cpu_s[key] / cpu_s[k], 2),
                 "spearman": round(float(spearmanr(cos[key], cos[k])[0]), 5),
                 "min_cos_to_fp32": float(np.min(np.sum(unit[k] * unit[key], axis=1))),
                 "gate": "reference" if k.startswith("ST") else
                 ("not gated (torch)" if k == "ours torch fp32" else gate(unit[key][gidx], unit[k][gidx]))}
             for k, t in best.items()}
    m.use_backend("auto")
    accel.AUTO_MIN = 0
    t0 = time.perf_counter()
    m.encode(texts, bs, "auto")
    first = time.perf_counter() - t0
    return {"model": spec, "sentences": len(texts), "rows": table,
            "skipped": {k: v for k, v in fwds.items() if not callable(v)},
            "auto": m.choice.describe(), "auto_first_call_s": round(first, 1)}


def markdown(res: dict, what: str, unit: str) -> str:
    lines = [f"| {what} | {unit}/s (wall) | vs ST fp32 | {unit} per CPU-s | vs ST fp32 (CPU) | Spearman vs fp32 labels "
             "| gate (512-item sample) |", "|---|---:|---:|---:|---:|---:|---|"]
    for k, r in res["rows"].items():
        lines.append(f"| {k} | {r['per_s']} | {r['ratio']:.2f}x | {r['per_cpu_s']} | {r['ratio_cpu']:.2f}x "
                     f"| {r['spearman']:.5f} | {r['gate']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cross", required=True, help="a trained cross-encoder (directory)")
    ap.add_argument("--bi", default="bundled:all-MiniLM-L6-v2")
    ap.add_argument("--stsb", required=True, help="the STS Benchmark archive (Stsbenchmark.tar.gz)")
    ap.add_argument("--n", type=int, default=2500, help="pairs (auto decides on calls of 2,048 or more)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads, and so every backend's (default: torch's)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default=None, help="export cache (default: a temporary folder)")
    ap.add_argument("--only", choices=("cross", "bi"), default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    pairs = stsb_pairs(args.stsb, args.n, args.seed)
    with tempfile.TemporaryDirectory(prefix="accel-") as tmp:
        cache = Path(args.cache or tmp)
        out = {"cpu": cpu(), "batch_size": args.batch_size, "rounds": args.rounds, "load_before": os.getloadavg()}
        if args.only != "bi":
            out["cross"] = bench_cross(args.cross, pairs, args.batch_size, args.rounds, cache)
        if args.only != "cross":
            out["bi"] = bench_bi(args.bi, pairs, args.batch_size, args.rounds, cache)
        out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))
    if "cross" in out:
        print(f"\ncross-encoder {out['cross']['model']}, {out['cross']['pairs']} pairs\n"
              + markdown(out["cross"], "labelling", "pairs"))
        print(f"auto: {out['cross']['auto']}")
    if "bi" in out:
        print(f"\nbi-encoder {out['bi']['model']}, {out['bi']['sentences']} sentences\n"
              + markdown(out["bi"], "encoding", "sentences"))
        print(f"auto: {out['bi']['auto']}")


if __name__ == "__main__":
    main()
