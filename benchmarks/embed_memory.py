"""Where stage embed's memory goes: its function run once, resident memory sampled every 0.25 s and tagged by phase
(reading the sentences, the teacher's embeddings, writing them, scoring, training). ``--train-rows`` trains on the
first rows only while every sentence stays loaded, so two runs that differ in ``--max-corpus`` alone show what
holding more sentences costs (docs/fast-student.md, "Where the memory goes").

    python -m benchmarks.embed_memory --params params.yaml --clean data/clean --cut models/cut \\
        --corpus /work/corpus/corpus.txt --max-corpus 20000 --train-rows 20000 --out /tmp/embed-memory

Run it as a module from the repository root (``python -m``), so the stages are this checkout's. Linux only
(/proc/self/status). Prints each phase's peak ("other": between the phases: loading, the report) and writes the
timeline as JSON under --out.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

import yaml

import stages.embed as stage
from pldistill.validate import load_params

PHASES = {"gather": stage.embedding, "teacher_embeddings": stage.embedding, "write_embeddings": stage.embedding,
          "split_scores": stage, "fit_at": stage}


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise OSError("no VmRSS in /proc/self/status")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("params", "clean", "cut", "out"):
        ap.add_argument(f"--{name}", type=Path, required=True)
    ap.add_argument("--corpus", default=None)
    ap.add_argument("--max-corpus", type=int, default=None)
    ap.add_argument("--train-rows", type=int, default=None)
    args = ap.parse_args()
    phase, timeline = ["other"], []

    def sample() -> None:
        while True:
            timeline.append((time.time(), phase[0], rss_mb()))
            time.sleep(0.25)

    def tagged(owner: object, name: str) -> None:
        fn = getattr(owner, name)

        def run(*a, **k):
            before, phase[0] = phase[0], name
            try:
                return fn(*a, **k)
            finally:
                phase[0] = before

        setattr(owner, name, run)

    fit_at = stage.fit_at

    def capped(model, loss, texts, target, *a, **k):  # the first rows only; every sentence stays loaded
        if args.train_rows:
            texts, target = tuple(c[: args.train_rows] for c in texts), target[: args.train_rows]
        return fit_at(model, loss, texts, target, *a, **k)

    stage.fit_at = capped
    for name, owner in PHASES.items():
        tagged(owner, name)
    raw = yaml.safe_load(args.params.read_text())
    raw["embed"].update(corpus=args.corpus, max_corpus=args.max_corpus)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "params.yaml").write_text(yaml.safe_dump(raw))
    params = load_params(args.out / "params.yaml")
    threading.Thread(target=sample, daemon=True).start()
    report = stage.embed(params, args.clean, Path("models/teacher"), args.out / "embed", args.out / "model",
                         args.out / "report.json", args.out / "curve.csv", args.cut)
    peaks: dict[str, float] = {}
    for _, name, mb in timeline:
        peaks[name] = max(peaks.get(name, 0.0), mb)
    print(json.dumps({"sentences": report["sentences"], "peak_rss_mb": report["peak_rss_mb"],
                      "phase_peak_mb": {k: round(v) for k, v in peaks.items()}}, indent=2))
    (args.out / "timeline.json").write_text(json.dumps(timeline))


if __name__ == "__main__":
    main()
