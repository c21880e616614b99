"""Wall time of stages `label` and `gold` on 1 and 2 processes (params `processes`), started as dvc.yaml starts
them (`python -m pldistill.run.launch stages.<name> ...`), on STS-B pairs and the bundled MiniLM.

    python benchmarks/processes.py --stsb data/downloads/Stsbenchmark.tar.gz --work /tmp/processes \
        --pairs 4000 --train 1000

Runs: 1 process on 1 thread, 1 process on 2 threads, 2 processes on 1 thread each (torchrun's default),
each stage timed end to end (interpreter start, model load, work, writes). The teacher is the MiniLM as a
cross-encoder with a fresh head (time does not depend on the weights); the candidates are random pairs of
training sentences (labelling costs the same however they were chosen). Also reports how far the 2-process
silver labels and gold model's dev score are from the 1-process ones.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from pldistill.base import schemas
from pldistill.base.io import machine_path
from pldistill.data.datasets import load
from pldistill.models.encoders import CrossModel
from pldistill.params.config import parse_params
from pldistill.params.data import DataParams
from pldistill.teach.teachers import Calibration, Member, Teacher

RUNS = [("1 process, 1 thread", 1, 1), ("1 process, 2 threads", 1, 2), ("2 processes, 1 thread each", 2, 1)]


def inputs(stsb: str, work: Path, n_pairs: int, n_train: int, seed: int) -> None:
    """clean/{train,dev}.parquet, pairs/candidates.parquet and a teacher folder under ``work``."""
    splits = load(DataParams(dataset="stsb", source=stsb), seed).splits
    rng = np.random.default_rng(seed)
    train = splits["train"].sample(n=n_train, random_state=seed).reset_index(drop=True)
    schemas.write(work / "clean/train.parquet", train, schemas.PAIRS)
    schemas.write(work / "clean/dev.parquet", splits["dev"].iloc[:500], schemas.PAIRS)
    sentences = pd.unique(pd.concat([splits["train"]["sentence1"], splits["train"]["sentence2"]]))
    idx = rng.integers(0, len(sentences), size=(n_pairs, 2))
    cands = pd.DataFrame({"sentence1": sentences[idx[:, 0]], "sentence2": sentences[idx[:, 1]], "strategy": "bm25"})
    schemas.write(work / "pairs" / schemas.CANDIDATES_FILE, cands, schemas.CANDIDATES)
    model = CrossModel.load("bundled:all-MiniLM-L6-v2", 128)
    Teacher([Member("member-00", "cross", "bundled:all-MiniLM-L6-v2", True, model, Calibration())]).save(
        work / "teacher", {}, "benchmark teacher")


def timed(cmd: list[str], threads: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "false"}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)  # a failure exits with its stderr
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stsb", required=True)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--pairs", type=int, default=4000)
    ap.add_argument("--train", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    w = args.work
    inputs(args.stsb, w, args.pairs, args.train, args.seed)
    launch = [sys.executable, "-m", "pldistill.run.launch"]
    rows, silver, best = [], {}, {}
    for name, processes, threads in RUNS:
        out = w / f"p{processes}t{threads}"
        params = parse_params({"seed": args.seed, "processes": processes,
                               "label": {"batch_size": 64, "bf16": False}, "evaluate": {"bf16": False},
                               "student": {"epochs": 1, "batch_size": 16, "evals_per_epoch": 2,
                                           "layers": [0, 2, 4]}})  # named: no stage cut runs here
        pfile = out / "params.yaml"
        out.mkdir(parents=True, exist_ok=True)
        pfile.write_text(yaml.safe_dump(params.model_dump(mode="json"), sort_keys=False))
        label_s = timed([*launch, "stages.label", "--params", str(pfile), "--clean", str(w / "clean"),
                         "--pairs", str(w / "pairs"), "--teacher", str(w / "teacher"),
                         "--silver-dir", str(out / "silver"),
                         "--report", str(out / "label.json"), "--density", str(out / "density.csv")], threads)
        gold_s = timed([*launch, "stages.gold", "--params", str(pfile), "--clean", str(w / "clean"),
                        "--out", str(out / "gold"), "--report", str(out / "gold.json"),
                        "--curve", str(out / "curve.csv"), "--cut", str(out / "cut")],
                       threads)
        silver[name] = schemas.read(out / "silver" / schemas.SILVER_FILE, schemas.PSEUDO)["score"].to_numpy()
        report = json.loads((out / "gold.json").read_text())
        timed_gold, timed_label = (json.loads(machine_path(out / f).read_text()) for f in ("gold.json", "label.json"))
        best[name] = report["best_dev"]
        rows.append({"run": name, "label_wall_s": round(label_s, 1),
                     "label_pairs_per_s_in_stage": timed_label["label_pairs_per_s"],
                     "gold_wall_s": round(gold_s, 1), "gold_train_s": timed_gold["train_seconds"],
                     "gold_steps": report["steps"], "gold_best_dev": report["best_dev"]})
    ref = RUNS[0][0]
    print(json.dumps({"pairs": args.pairs, "train_pairs": args.train, "cpus": os.cpu_count(),
                      "load_avg_after": os.getloadavg(), "runs": rows,
                      "silver_max_abs_diff_vs_1_process": {n: float(np.abs(s - silver[ref]).max())
                                                           for n, s in silver.items()},
                      "gold_best_dev_diff_vs_1_process": {n: round(b - best[ref], 3) for n, b in best.items()}},
                     indent=2))


if __name__ == "__main__":
    main()
