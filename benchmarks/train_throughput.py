"""Pair-training throughput: this checkout's engine against a git revision's (e.g. the one before a change to
training), same pairs, same machine, in one run.

    python benchmarks/train_throughput.py --stsb data/downloads/Stsbenchmark.tar.gz --before d8ae094

Both sides train the same thing through the project's one way in (``pldistill.train.training.start`` with
``pair_loss``): the bundled all-MiniLM-L6-v2 as a bi-encoder, the first ``--pairs`` STS-B training
pairs (scores in [0, 1]), cosine MSE, 1 epoch, batch 16, lr 2e-5, length 128, random batches, one dev evaluation
(24 dev pairs) at the end, seed 42. ``--before`` is checked out into a temporary git worktree; each side runs in a
process of its own from its checkout, with this environment's packages; the sides alternate ``--repeats`` times, so
a machine shared with other jobs slows both alike. The timed part is ``finish()``: the training steps, the
optimizer, the dev evaluation and the engine's own overhead. Prints the CPU flags, threads and versions, each
side's steps/s (median and range), the ratio after/before and each side's dev score; appends a JSON line to
benchmarks/results/train_throughput.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What a side runs, in its own checkout: the same calls exist on both sides of the change measured.
SIDE = r"""
import json, sys, time
import pandas as pd, torch
try:  # its module since the layout change; before it, the losses package
    from pldistill.train.losses.pair import pair_loss
except ImportError:
    from pldistill.train.losses import pair_loss
from pldistill.models.encoders import BiEncoder
from pldistill.train.training import start
from pldistill.params.config import parse_params
pairs, threads = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(threads)
df = pd.read_json(pairs)
train, dev = df[df.split == "train"], df[df.split == "dev"]
p = parse_params({"student": {"model": "bundled:all-MiniLM-L6-v2", "layers": None, "epochs": 1, "batch_size": 16,
                              "lr": 2e-5, "max_length": 128, "evals_per_epoch": 1, "group_by_length": False,
                              "wise": False, "patience": None}, "evaluate": {"bf16": False}})
torch.manual_seed(42)
model = BiEncoder.load(p.student.model, p.student.max_length)
run = start(model, pair_loss(model, "cosine"), (list(train.sentence1), list(train.sentence2)),
            train.score.to_numpy(), dev, p.student, p.evaluate, torch.Generator().manual_seed(42), "throughput")
t0, c0 = time.perf_counter(), time.process_time()
res = run.finish()
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0, "steps": res.steps,
                  "dev": res.best_dev, "last_dev": res.curve[-1]["dev"]}))
"""


def stsb_pairs(archive: Path, n: int, out: Path) -> None:
    """The first ``n`` STS-B training pairs and the first 24 dev pairs, scores / 5, as a JSON table."""
    import pandas as pd

    rows = []
    with tarfile.open(archive) as tar:
        for split, name, keep in (("train", "sts-train.csv", n), ("dev", "sts-dev.csv", 24)):
            member = next(m for m in tar.getmembers() if m.name.endswith(name))
            lines = tar.extractfile(member).read().decode("utf-8").splitlines()
            for line in lines[:keep]:
                cols = line.split("\t")
                rows.append({"split": split, "sentence1": cols[5], "sentence2": cols[6], "score": float(cols[4]) / 5})
    pd.DataFrame(rows).to_json(out)


def side(checkout: Path, pairs: Path, threads: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": str(threads),
           "TOKENIZERS_PARALLELISM": "false", "PLDISTILL_STORE": tempfile.mkdtemp(prefix="throughput-store-")}
    done = subprocess.run([sys.executable, "-c", SIDE, str(pairs), str(threads)], cwd=checkout, env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: the side failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stsb", type=Path, required=True, help="the STS Benchmark archive (Stsbenchmark.tar.gz)")
    ap.add_argument("--before", required=True, help="the git revision to compare against, e.g. d8ae094")
    ap.add_argument("--pairs", type=int, default=640)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from pldistill.base.device import cpu_flags

    with tempfile.TemporaryDirectory(prefix="throughput-") as tmp:
        pairs, before = Path(tmp) / "pairs.json", Path(tmp) / "before"
        stsb_pairs(a.stsb, a.pairs, pairs)
        subprocess.run(["git", "worktree", "add", "--detach", str(before), a.before], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            runs: dict[str, list[dict]] = {"before": [], "after": []}
            for i in range(a.repeats):
                for name, checkout in (("before", before), ("after", ROOT)):
                    runs[name].append(side(checkout, pairs, a.threads))
                    r = runs[name][-1]
                    print(f"{i + 1}/{a.repeats} {name}: {r['steps'] / r['seconds']:.3f} steps/s "
                          f"({r['steps']} steps, {r['seconds']:.1f} s, dev {r['last_dev']:.2f})", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT, check=False)
    import torch
    import transformers

    rate = {name: [r["steps"] / r["seconds"] for r in rs] for name, rs in runs.items()}
    med = {name: statistics.median(v) for name, v in rate.items()}
    out = {"before": a.before, "pairs": a.pairs, "threads": a.threads, "cpu_flags": cpu_flags(),
           "torch": torch.__version__, "transformers": transformers.__version__,
           "steps_per_s": {k: [round(x, 3) for x in v] for k, v in rate.items()},
           "median": {k: round(v, 3) for k, v in med.items()}, "ratio": round(med["after"] / med["before"], 3),
           "dev": {k: [round(r["last_dev"], 2) for r in rs] for k, rs in runs.items()}}
    print(f"CPU: {out['cpu_flags']}; threads {a.threads}; torch {torch.__version__}")
    for k in ("before", "after"):
        print(f"{k}: {med[k]:.3f} steps/s median [{min(rate[k]):.3f}, {max(rate[k]):.3f}] over {a.repeats}")
    print(f"after / before: {out['ratio']:.3f}x")
    results = ROOT / "benchmarks" / "results"
    results.mkdir(parents=True, exist_ok=True)
    with (results / "train_throughput.jsonl").open("a") as f:
        f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
