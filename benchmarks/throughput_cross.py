"""The cross-encoder that benchmarks/label_throughput.py labels with: MiniLM fine-tuned on 2,000 STS Benchmark
training pairs, 1 epoch, lr 5e-5, fp32 (about 5 min on one thread). Runs the pipeline's own stages.

    python benchmarks/throughput_cross.py --stsb ../shared/data/Stsbenchmark.tar.gz --out /tmp/accel/run
    python benchmarks/label_throughput.py --cross /tmp/accel/run/teacher/member-00 --stsb ...
"""

from __future__ import annotations

import argparse
from pathlib import Path

from teachers_stsb import MINILM, TEACHERS, params_for

from stages.augment import augment
from stages.download import download
from stages.teacher import teacher

TEACHERS["throughput-cross"] = {"model": MINILM, "kind": "cross", "epochs": 1, "lr": 5e-5, "evals_per_epoch": 1,
                                "bf16": False}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stsb", required=True, help="the STS Benchmark archive (Stsbenchmark.tar.gz)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/accel/run"))
    ap.add_argument("--pairs", type=int, default=2000, help="gold training pairs")
    args = ap.parse_args()
    p = params_for(args.stsb, "throughput-cross", "none", "augsbert", {}, max_train=args.pairs)
    download(p, args.out / "data/raw", args.out / "download.json")
    augment(p, args.out / "data/raw", args.out / "clean", args.out / "augment.json")
    teacher(p, args.out / "clean", args.out / "teacher", args.out / "teacher.json", args.out / "dev.csv")
    print(f"cross-encoder: {args.out / 'teacher/member-00'}")


if __name__ == "__main__":
    main()
