"""Seed optimisation on STS Benchmark against its obvious alternative, in one run.

    python benchmarks/seed_optimisation.py --stsb data/downloads/Stsbenchmark.tar.gz --repeats 2

Per repeat r, seeds 42 + 10 r ... 42 + 10 r + S - 1, the gold-only bi-encoder (stage gold: the bundled
MiniLM, cosine MSE, params.yaml's student settings with 5 dev evaluations an epoch, so the 20% stop is a
checkpoint of every run):
- seed-optimised: ``wrappers.train_model`` with ``student.seeds`` S, ``seed_stop`` 0.2 (the feature itself);
- the alternative: each of the S seeds trained to the end alone, the best on dev kept.
Reports each seed's final dev/test Spearman (their spread), which seed each method keeps, both
methods' test scores and wall times, and checks that the seed-optimised model is the same seed's full
run. Appends one JSON line per repeat to benchmarks/results/seed_optimisation.jsonl.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from pldistill.base import cleaning
from pldistill.base.metrics import split_scores
from pldistill.data import datasets
from pldistill.params.config import load_params
from pldistill.params.data import DataParams
from pldistill.students import cut
from pldistill.train import wrappers


def stsb(path: str, seed: int) -> dict:
    """STS-B as the pipeline sees it: train cleaned (stage augment's rules), dev and test normalised."""
    loaded = datasets.load(DataParams(dataset="stsb", source=path), seed)
    train, _ = cleaning.clean_train(loaded.splits["train"], min_chars=4)
    return {"train": train, "dev": cleaning.normalise_pairs(loaded.splits["dev"]),
            "test": cleaning.normalise_pairs(loaded.splits["test"])}


def train(student, ep, data: dict, seed: int, desc: str) -> tuple[dict, dict, float]:
    t0 = time.perf_counter()
    tr = data["train"]
    model, res = wrappers.train_model(student, ep, list(tr["sentence1"]), list(tr["sentence2"]), list(tr["score"]),
                                data["dev"], seed, desc)
    seconds = time.perf_counter() - t0
    scores = split_scores(model, {s: data[s] for s in ("dev", "test")}, ep)
    return {s: scores[s]["spearman"] for s in scores}, res.summary(), seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stsb", required=True)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--stop", type=float, default=0.2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out", default="benchmarks/results/seed_optimisation.jsonl")
    args = ap.parse_args()
    params = load_params(args.params)
    ep = params.evaluate
    base = params.student.model_copy(update={"evals_per_epoch": 5, "seed_stop": args.stop})
    data = stsb(args.stsb, params.seed)
    if base.layers == "auto":  # what stage cut would choose: every cut of student.keep layers, scored untrained on dev
        chosen = cut.choose(params, data["dev"])["layers"]
        base = base.model_copy(update={"layers": None if chosen is None else tuple(chosen)})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for r in range(args.repeats):
        first = params.seed + 10 * r
        opt, opt_fit, opt_s = train(base.model_copy(update={"seeds": args.seeds}), ep, data, first, "seed-optimised")
        alone = []
        for s in range(first, first + args.seeds):
            scores, fit, seconds = train(base, ep, data, s, f"seed {s} alone")
            alone.append({"seed": s, **scores, "best_step": fit["best_step"], "seconds": round(seconds, 1)})
        best = max(alone, key=lambda a: a["dev"])
        chosen = opt_fit["seed_optimisation"]["chosen"]
        same = next(a for a in alone if a["seed"] == chosen)
        tests = [a["test"] for a in alone]
        row = {
            "repeat": r, "seeds": list(range(first, first + args.seeds)), "stop": args.stop,
            "train_pairs": len(data["train"]), "machine": platform.processor() or platform.machine(),
            "per_seed": alone,
            "spread_test": {"mean": round(statistics.mean(tests), 2), "std": round(statistics.stdev(tests), 2),
                            "min": min(tests), "max": max(tests)},
            "seed_optimised": {"chosen": chosen, **opt, "seconds": round(opt_s, 1),
                               "dev_at_stop": {t["seed"]: t["dev_at_stop"]
                                               for t in opt_fit["seed_optimisation"]["trials"]},
                               "same_as_its_full_run": bool(np.isclose(opt["test"], same["test"], atol=0.01))},
            "all_to_the_end": {"chosen": best["seed"], "dev": best["dev"], "test": best["test"],
                               "seconds": round(sum(a["seconds"] for a in alone), 1)},
        }
        row["time_ratio"] = round(row["all_to_the_end"]["seconds"] / row["seed_optimised"]["seconds"], 2)
        print(json.dumps(row), flush=True)
        with open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")
        rows.append(row)
    if len(rows) > 1:  # over repeats: mean +- std of what each method keeps
        for key in ("seed_optimised", "all_to_the_end"):
            t = [row[key]["test"] for row in rows]
            print(f"{key}: test {statistics.mean(t):.2f} +- {statistics.stdev(t):.2f} over {len(rows)} repeats")
        singles = [a["test"] for row in rows for a in row["per_seed"]]
        print(f"one seed: test {statistics.mean(singles):.2f} +- {statistics.stdev(singles):.2f} "
              f"over {len(singles)} runs")


if __name__ == "__main__":
    main()
