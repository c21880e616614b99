"""The student's lead over its gold-only baseline and its teacher, with a paired-bootstrap 95% interval, for DVC
experiments: read back from each experiment's `metrics/plots/test-predictions.csv` (git holds it in the experiment's
commit), scored as stage evaluate scores eval.json's `gain` (pldistill.base.metrics.paired_gain). For experiments run
before eval.json carried `gain`; a newer one has it in `dvc exp show` already (gain.gold.test.spearman, .low, .high).

    python benchmarks/exp_gains.py default-wise-s42 corpus-wise-s42 HEAD   # experiment names, or a git revision
"""

from __future__ import annotations

import argparse
import io
import subprocess

import numpy as np
import pandas as pd

from pldistill.base.metrics import paired_gain

PREDICTIONS = "metrics/plots/test-predictions.csv"  # columns gold, bi (student), cross (teacher), start, gold_bi


def revision(name: str) -> str:
    """An experiment's ref (refs/exps/...), or ``name`` itself (a branch, a commit, HEAD)."""
    refs = subprocess.run(["git", "for-each-ref", "refs/exps", "--format=%(refname)"], capture_output=True,
                          text=True, check=True).stdout.split()
    found = [r for r in refs if r.rsplit("/", 1)[1] == name]
    return found[0] if found else name


def gains(name: str, rounds: int, seed: int) -> dict[str, dict]:
    shown = subprocess.run(["git", "show", f"{revision(name)}:{PREDICTIONS}"], capture_output=True, text=True,
                           check=False)
    if shown.returncode:
        raise SystemExit(f"{name}: no {PREDICTIONS} there ({shown.stderr.strip()}); expected an experiment name "
                         f"(dvc exp show lists them) or a git revision")
    df = pd.read_csv(io.StringIO(shown.stdout))
    rng = np.random.default_rng(seed)  # one stream: gold-only first, then the teacher (test pairs only)
    return {"pairs": len(df), **{who: paired_gain(df["bi"], df[col], df["gold"], "regression", rounds, rng)
                                 for who, col in (("gold-only", "gold_bi"), ("teacher", "cross"))}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="+", help="experiment names or git revisions")
    ap.add_argument("--rounds", type=int, default=1000, help="resamples of the test pairs (evaluate.gain_rounds)")
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    print("| experiment | test pairs | lead over gold-only [95%] | lead over the teacher [95%] |\n|---|---|---|---|")
    for name in args.names:
        g = gains(name, args.rounds, args.seed)
        cells = [f"{x['spearman']:+.2f} [{x['low']:+.2f}, {x['high']:+.2f}]" for x in (g["gold-only"], g["teacher"])]
        print(f"| {name} | {g['pairs']} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
