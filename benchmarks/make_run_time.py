"""`make run` as a new user runs it, timed per stage: a fresh clone, an empty DVC cache, the environment already
made; with this CPU's own kernels and with torch, MKL and oneDNN held to AVX2, in turns, and the ratio.

Each run clones the repository at ``--rev`` into a temporary folder, points its DVC cache at an empty folder
(``dvc cache dir --local``) and runs ``make -o <venv>/.installed run VENV=<venv>``: every stage runs, and the
environment is used as it is (``-o``: the clone's newer pyproject.toml does not reinstall the package from the
clone). The held run sets ``ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2``: the
kernels a CPU without AVX-512 gets, run on this CPU's cores and clock. That is a bound from below for such a
machine, not its time: an AMD EPYC without AVX-512 took 1.40-1.51x the held run's time for the same commit
(docs/fast-student.md, "make run on a CPU without AVX-512").

    python benchmarks/make_run_time.py                          # HEAD: this CPU's kernels, then held to AVX2
    python benchmarks/make_run_time.py --modes avx2 --rev 71eef4a --set 'embed.variants=1'
    python benchmarks/make_run_time.py --modes avx2 --warm 1,0  # warm interpreter, then a Python a stage
    python benchmarks/make_run_time.py --diff                   # and what each run changed against the commit

``--warm 0`` runs ``make run WARM=0``: each stage in a Python of its own, as `dvc repro` alone runs them,
instead of one warm interpreter for them all (pldistill.warm; a commit before it has no such choice).

``--set KEY=VALUE`` edits the clone's params.yaml (``dvc exp run -S`` style, dotted keys) before the run.
Nothing else should run meanwhile: on 2 cores a second job changes every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from pldistill.base.device import cpu_flags  # noqa: E402 -- benchmarks/ is a folder of scripts, not a package

AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
MODES = {"native": {}, "avx2": AVX2}
STAGE = re.compile(r"Running stage '([^']+)'")


def stage_seconds(lines: list[tuple[float, str]], end: float) -> dict[str, float]:
    """Each stage's seconds, from (time, line) pairs of `dvc repro`'s output: a stage runs from its
    "Running stage 'name':" line to the next one's, the last to ``end``. Skipped stages print no such line."""
    starts = [(t, m.group(1)) for t, line in lines if (m := STAGE.search(line))]
    ends = [t for t, _ in starts[1:]] + [end]
    return {name: round(stop - t, 1) for (t, name), stop in zip(starts, ends)}


def set_params(path: Path, settings: list[str]) -> None:
    """``key.sub=value`` settings written into params.yaml (values parsed as YAML, like ``dvc exp run -S``);
    an unknown key is refused, as the pipeline's config would refuse it later."""
    params = yaml.safe_load(path.read_text())
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep:
            raise SystemExit(f"--set {setting!r}: expected KEY=VALUE, e.g. embed.variants=1")
        *parents, leaf = key.split(".")
        node = params
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or leaf not in node:
            raise SystemExit(f"--set {setting!r}: {path} has no key {key}")
        node[leaf] = yaml.safe_load(value)
    path.write_text(yaml.safe_dump(params, sort_keys=False))


SPEED_KEYS = {"speed", "speed_low", "speed_high", "chosen"}  # measured each run, and what follows from them


def leaves(node, path: str = "") -> dict[str, object]:
    """A JSON document's leaves by dotted path."""
    if isinstance(node, dict):
        return {k: v for key, sub in node.items() for k, v in leaves(sub, f"{path}.{key}" if path else key).items()}
    return {path: node}


def drift(clone: Path, rev: str) -> str:
    """What the run changed against the commit: the files `git status` lists, and in metrics/*.json the leaves
    that differ, speed figures apart from the rest, with the largest difference among the numbers."""
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True,
                            check=True).stdout.splitlines()
    lines = [f"  git status: {len(status)} paths changed" + (": " + ", ".join(s[3:] for s in status) if status else "")]
    for name in sorted({s[3:] for s in status if s[3:].startswith("metrics/") and s.endswith(".json")}):
        old = subprocess.run(["git", "show", f"{rev}:{name}"], cwd=clone, capture_output=True, text=True,
                             check=True).stdout
        before, after = leaves(json.loads(old)), leaves(json.loads((clone / name).read_text()))
        changed = [k for k in after if before.get(k) != after[k]]
        speed = [k for k in changed if k.rsplit(".", 1)[-1] in SPEED_KEYS]
        rest = [k for k in changed if k not in speed]
        nums = [abs(after[k] - before[k]) for k in rest
                if isinstance(after[k], (int, float)) and isinstance(before.get(k), (int, float))]
        lines.append(f"  {name}: {len(speed)} speed leaves changed; {len(rest)} others"
                     + (f" (largest difference {max(nums):.4g}: " + ", ".join(
                         f"{k} {before.get(k)} -> {after[k]}" for k in rest[:6]) + ")" if rest else ""))
    return "\n".join(lines)


def run(rev: str, venv: Path, env: dict[str, str], settings: list[str], work: Path,
        make_args: tuple[str, ...] = (), report: bool = False) -> tuple[float, dict, int]:
    """One fresh clone's `make run`: (seconds in all, seconds a stage, make's exit status). With ``report``,
    prints what the run changed against the commit (its `git status` and metrics)."""
    clone, cache = work / "clone", work / "cache"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", rev], cwd=clone, check=True)
    if settings:
        set_params(clone / "params.yaml", settings)
    subprocess.run([str(venv / "bin" / "dvc"), "cache", "dir", "--local", str(cache)], cwd=clone, check=True)
    # QUIET=0: DVC's "Running stage" lines, which time the stages (a commit before issue 77 ignores it)
    cmd = ["make", "-o", str(venv / ".installed"), "run", f"VENV={venv}", "QUIET=0", *make_args]
    lines: list[tuple[float, str]] = []
    start = time.monotonic()
    with subprocess.Popen(cmd, cwd=clone, env={**os.environ, **env}, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace") as proc:
        for line in proc.stdout:
            lines.append((time.monotonic() - start, line))
            if STAGE.search(line) or "gold-only baseline" in line or "warm interpreter:" in line:
                print(f"  {lines[-1][0]:6.1f} s  {line.strip()}", flush=True)
    total = time.monotonic() - start
    if proc.returncode:
        print("".join(line for _, line in lines[-40:]), end="")  # the failure's own words
    elif report:
        print(drift(clone, rev), flush=True)
    return total, stage_seconds(lines, total), proc.returncode


def table(results: dict[str, tuple[float, dict, int]]) -> str:
    """Stages as rows, modes as columns; with two modes, the second's time over the first's. A stage whose
    outputs matched the lock in one run was skipped there (stage evaluate, where the weights came out
    byte-identical), so the stages both runs ran get their own sum."""
    modes = list(results)
    stages = list(dict.fromkeys(s for _, per, _ in results.values() for s in per))
    both = [s for s in stages if all(s in per for _, per, _ in results.values())]
    head = "| stage | " + " | ".join(f"{m} (s)" for m in modes) + (" | ratio |" if len(modes) == 2 else " |")
    rows = [head, "|---" * (len(modes) + 1 + (len(modes) == 2)) + "|"]
    picks = [(s, lambda r, s=s: r[1].get(s)) for s in stages]
    if both != stages:
        picks.append(("stages run in both", lambda r: sum(r[1][s] for s in both)))
    for name, pick in [*picks, ("**make run**", lambda r: r[0])]:
        vals = [pick(results[m]) for m in modes]
        cells = ["" if v is None else f"{v:.1f}" for v in vals]
        if len(modes) == 2:
            cells.append(f"{vals[1] / vals[0]:.2f}x" if all(vals) else "")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", default="HEAD", help="the commit to clone (default HEAD)")
    ap.add_argument("--venv", type=Path, default=ROOT / ".venv", help="the environment, already made")
    ap.add_argument("--modes", default="native,avx2", help="native (this CPU's kernels) and/or avx2 (held)")
    ap.add_argument("--warm", default="1", help="1 (make run's warm interpreter) and/or 0 (make run WARM=0)")
    ap.add_argument("--set", action="append", default=[], dest="settings", metavar="KEY=VALUE",
                    help="a params.yaml setting for the clone, e.g. embed.variants=1 (repeatable)")
    ap.add_argument("--diff", action="store_true",
                    help="after each run, what it changed against the commit: git status and the metrics")
    args = ap.parse_args()
    modes = args.modes.split(",")
    if unknown := set(modes) - set(MODES):
        raise SystemExit(f"--modes: unknown {', '.join(sorted(unknown))}; expected native and/or avx2")
    warms = args.warm.split(",")
    if unknown := set(warms) - {"0", "1"}:
        raise SystemExit(f"--warm: unknown {', '.join(sorted(unknown))}; expected 1 and/or 0")
    if bad := [x for x in args.settings if "=" not in x]:
        raise SystemExit(f"--set {bad[0]!r}: expected KEY=VALUE, e.g. embed.variants=1")
    if not (args.venv / ".installed").is_file():
        raise SystemExit(f"{args.venv}: no environment made there (no .installed); run `make env` first")
    found = subprocess.run(["git", "rev-parse", "--short", "--verify", f"{args.rev}^{{commit}}"], cwd=ROOT,
                           capture_output=True, text=True, check=False)
    if found.returncode:
        raise SystemExit(f"--rev {args.rev}: not a commit of {ROOT} ({found.stderr.strip()})")
    rev = found.stdout.strip()
    print(f"cpu: {cpu_flags()}; {os.cpu_count()} cores; commit {rev}; settings {args.settings or 'none'}")
    results = {}
    for mode in modes:
        held = " ".join(f"{k}={v}" for k, v in MODES[mode].items())
        for warm in warms:
            name = mode if len(warms) == 1 else f"{mode} {'warm' if warm == '1' else 'WARM=0'}"
            print(f"{name}: {held or 'the kernels this CPU selects'}", flush=True)
            with tempfile.TemporaryDirectory(prefix="make-run-") as work:
                results[name] = run(rev, args.venv.resolve(), MODES[mode], args.settings, Path(work),
                                    () if warm == "1" else ("WARM=0",), args.diff)
            if results[name][2]:
                raise SystemExit(f"{name}: make run failed (exit {results[name][2]}); the end of its output is above")
    print(table(results))


if __name__ == "__main__":
    main()
