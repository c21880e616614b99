"""What metrics/eval.json says of the student, in plain words: its test lead over its gold-only baseline and over
its teacher (eval.json ``gain``), and whether each lead is beyond the sampling noise of the test pairs; the form it
serves (``export.chosen``); then the commands that come next. `make run` prints it once, after `dvc repro`, cached
or not:

    python -m pldistill.verdict metrics/eval.json
"""

from __future__ import annotations

import configparser
import json
import sys
from pathlib import Path

NEXT = [  # (what, the command): the last lines of `make run`
    ("score a table", "python -m pldistill.score models/serve --table pairs.csv --out scored.csv"),
    ("load it", "models/serve/README.md: sentence-transformers loads it, without pldistill"),
    ("compare runs", "dvc exp run -S seed=43, then make exps"),
]


def verdict(result: dict) -> list[str]:
    """eval.json's ``gain`` in words, a line per model the student is compared with: its test lead, the 95% interval,
    and whether the lead is beyond the sampling noise of the test pairs. None without ``gain`` (gain_rounds 0)."""
    lines = []
    for name, who in (("gold", "a model trained on the gold pairs alone"), ("teacher", "its teacher")):
        g = result.get("gain", {}).get(name, {}).get("test")
        if not g:
            continue
        metric = next(k for k in g if k not in ("low", "high"))
        said = ("better, beyond the test pairs' noise" if g["low"] > 0 else
                "worse, beyond the test pairs' noise" if g["high"] < 0 else "too close to tell on these test pairs")
        lines.append(f"the student against {who}: {g[metric]:+.2f} test {metric} [{g['low']:+.2f}, {g['high']:+.2f}]: "
                     f"{said}")
    if free := result.get("baseline", {}).get("order_free"):
        lines.append(order_line(result, free))
    if chosen := result.get("export", {}).get("chosen"):
        served = result["bi"] if chosen == "torch" else result["export"][chosen]
        metric = next(iter(served["test"]))
        speed = (f", {served['speed']}x as fast [{served['speed_low']}, {served['speed_high']}] as the whole model it "
                 f"started from" if "speed" in served else "")
        lines.append(f"served (models/serve): {chosen}, test {metric} {served['test'][metric]} (the torch student: "
                     f"{result['bi']['test'][metric]}){speed}")
    return lines


def has_remote(root: Path = Path(".")) -> bool:
    """Whether DVC has a remote to push to (.dvc/config or config.local names one)."""
    parser = configparser.ConfigParser()
    try:
        parser.read([root / ".dvc" / "config", root / ".dvc" / "config.local"])
    except configparser.Error:  # DVC's own reader is more lenient: say nothing rather than guess
        return False
    return any(section.strip("'").startswith("remote ") for section in parser.sections())  # ['remote "name"']


def next_steps(remote: bool) -> list[str]:
    """The commands that come next, one a line: score a table, load the served student, compare experiments, and
    `dvc push` where a remote is set."""
    steps = [*NEXT, *([("share it", "dvc push")] if remote else [])]
    width = max(len(what) for what, _ in steps)
    return ["next:"] + [f"  {what + ':':<{width + 1}} {how}" for what, how in steps]


def order_line(result: dict, free: dict) -> str:
    """What word order is worth to the teacher (baseline.order_free, a static student's run), and the student's
    score against the teacher's without it. Shuffled sentences are unlike any the teacher learned, so its score
    without word order is an estimate, not a ceiling: a static student can pass it."""
    teacher = next(result[k] for k in ("cross", "teacher", "ensemble") if k in result)
    metric = next(iter(free["test"]))
    t, f, s = teacher["test"][metric], free["test"][metric], result["bi"]["test"][metric]
    return (f"teacher without word order (each pair's words shuffled): test {metric} {f}, against {t} as is: word "
            f"order is worth {t - f:.2f} to it, and a static student reads none; the student has {s} ({s - f:+.2f} "
            f"over the teacher without word order)")


if __name__ == "__main__":
    print("\n".join([*verdict(json.loads(Path(sys.argv[1]).read_text())), *next_steps(has_remote())]))
