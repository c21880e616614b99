"""Two sides of a change across seeds, paired by seed: each side's student test Spearman (dev in brackets) from its
experiment's eval.json, the difference per seed, their mean and a 95% t interval (n - 1 degrees of freedom). A seed's
random stream moves the whole pipeline's figure by a few tenths on STS-B; pairing by seed and counting seeds is what
tells a change from that noise.

    python benchmarks/seed_pairs.py 42=s76c-before-serve-s42:s78b-serve-s42 46=s76d-before-serve-s46:s76d-serve-s46
    python benchmarks/seed_pairs.py 43=82.76:s76c-serve-s43   # a side measured elsewhere: its test figure alone

Each side is an experiment name (`dvc exp show` lists them) or a git revision, or a number.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess

from exp_gains import revision  # benchmarks/ is a folder of scripts, run from the project's root
from scipy.stats import t as student_t

EVAL = "metrics/eval.json"


def figures(side: str) -> tuple[float, float | None]:
    """(test, dev) Spearman x100 of the student of ``side``: an experiment or revision, or a test figure given."""
    try:
        return float(side), None
    except ValueError:
        pass
    shown = subprocess.run(["git", "show", f"{revision(side)}:{EVAL}"], capture_output=True, text=True, check=False)
    if shown.returncode:
        raise SystemExit(f"{side}: no {EVAL} there ({shown.stderr.strip()}); expected an experiment name (dvc exp "
                         "show lists them), a git revision or a number")
    bi = json.loads(shown.stdout)["bi"]
    return bi["test"]["spearman"], bi["dev"]["spearman"]


def paired(differences: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): the mean difference and its t interval; one seed gives no interval (nan, nan)."""
    mean = statistics.fmean(differences)
    if len(differences) < 2:
        return mean, float("nan"), float("nan")
    half = student_t.ppf((1 + level) / 2, len(differences) - 1) * statistics.stdev(differences)
    half /= len(differences) ** 0.5
    return mean, mean - half, mean + half


def cell(test: float, dev: float | None) -> str:
    return f"{test:.2f}" + ("" if dev is None else f" ({dev:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", metavar="SEED=BEFORE:AFTER", help="a seed and its two sides")
    args = ap.parse_args()
    print("| seed | before, test (dev) | after, test (dev) | after - before |\n|---|---|---|---|")
    befores, diffs = [], []
    for pair in args.pairs:
        seed, _, sides = pair.partition("=")
        before, _, after = sides.partition(":")
        if not (seed and before and after):
            raise SystemExit(f"{pair!r}: expected SEED=BEFORE:AFTER, e.g. 42=s76c-before-serve-s42:s78b-serve-s42")
        (bt, bd), (at, ad) = figures(before), figures(after)
        befores.append(bt)
        diffs.append(at - bt)
        print(f"| {seed} | {cell(bt, bd)} | {cell(at, ad)} | {at - bt:+.2f} |")
    mean, low, high = paired(diffs)
    print(f"| mean of {len(diffs)} | {statistics.fmean(befores):.2f} | {statistics.fmean(befores) + mean:.2f} | "
          f"{mean:+.2f} [{low:+.2f}, {high:+.2f}] |")


if __name__ == "__main__":
    main()
