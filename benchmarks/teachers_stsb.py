"""Teachers that lead their students, on STS Benchmark: the quality table of docs/results.md (issue 13).

Runs the pipeline's own stage functions, sharing what rows have in common (the data, each teacher, each
labelling), and keeps every trained model in OUT/<step>/ so a row can be inspected or reused. A step whose
report exists is skipped, so a killed run resumes. Prints a Markdown table and writes OUT/results.json.

    python benchmarks/teachers_stsb.py --stsb ../shared/data/Stsbenchmark.tar.gz --out /tmp/teachers-stsb
    python benchmarks/teachers_stsb.py --stsb ... --rows mpnet-bi,aug-mpnet-bi   # a subset

The settings below are the whole experiment; everything else is params.yaml's default.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

from pldistill import schemas
from pldistill.dse import DSE, HEAD_DIR
from pldistill.io import write_json
from pldistill.models import BiEncoder
from pldistill.sampling import new_pairs
from pldistill.teachers import Teacher
from pldistill.training import split_scores
from pldistill.validate import parse_params
from stages.augment import augment
from stages.distill import distill
from stages.download import download
from stages.evaluate import evaluate
from stages.gold import gold
from stages.label import label
from stages.sample import sample
from stages.teacher import teacher

ROOT = Path(__file__).resolve().parents[1]
MAX_TRAIN = 1000  # gold training pairs (CPU-feasible); None: all 5,749
SEED = 42
MPNET = "bundled:all-mpnet-base-v2"
MINILM = "bundled:all-MiniLM-L6-v2"
PRUNED = [0, 2, 4]  # a 3-layer MiniLM student
ST = "sentence-transformers"  # student.trainer: sentence-transformers' trainers instead of our loop
# Pinned here, not taken from params.yaml (whose defaults are the demo's): Augmented SBERT's setting, as
# in docs/results.md's STS-B tables up to 0.5.0. A pruned student trains longer and faster (as the demo's).
BASE = {"sample": {"top_k": 3},
        "teacher": {"kind": "cross", "finetune": True, "calibrate": "auto", "members": [], "layers": None},
        "student": {"layers": None, "lr": 2.0e-5, "epochs": 1}}
PRUNED_STUDENT = {"layers": PRUNED, "lr": 1.0e-4, "epochs": 2}
# Teachers: each a `teacher` params section (the rest from params.yaml).
TEACHERS = {
    "minilm-cross": {"model": MINILM, "kind": "cross", "epochs": 2},
    "mpnet-cross": {"model": MPNET, "kind": "cross", "epochs": 2, "evals_per_epoch": 1, "bf16": "auto"},
    "mpnet-bi": {"model": MPNET, "kind": "bi", "epochs": 1},
    "mpnet-bi-e4": {"model": MPNET, "kind": "bi", "epochs": 4},  # the 1-epoch teacher kept its last step
    "mpnet-bi-given": {"model": MPNET, "kind": "bi", "finetune": False},
    "minilm-bi": {"model": MINILM, "kind": "bi"},
    # Two teachers above reused as given (no second training; "{out}" is --out): MPNet fine-tuned on the gold
    # pairs and MPNet zero-shot, each put on the gold scale by its own calibration, averaged.
    "ensemble": {"model": "{out}/teacher-mpnet-bi/model/member-00", "kind": "bi", "finetune": False,
                 "members": [{"model": "{out}/teacher-mpnet-bi-given/model/member-00", "kind": "bi"}]},
}
# Rows: (teacher or None, sample.strategy, recipe, student section overrides[, sample.top_k]).
ROWS = {
    "gold-only": (None, "none", "augsbert", {}),
    "aug-minilm-cross": ("minilm-cross", "bm25", "augsbert", {}),
    "aug-mpnet-bi": ("mpnet-bi", "bm25", "augsbert", {}),
    "aug-mpnet-bi-k10": ("mpnet-bi", "bm25", "augsbert", {}, 10),
    "aug-mpnet-bi-given": ("mpnet-bi-given", "bm25", "augsbert", {}),
    "aug-ensemble": ("ensemble", "bm25", "augsbert", {}),
    # BM25 pairs are mostly dissimilar (silver mean 0.29, gold 0.56): the same teacher on pairs that semantic
    # search finds (similar ones), and on both (the paper's BM25 + S.S.)
    "aug-mpnet-bi-semantic": ("mpnet-bi", "semantic", "augsbert", {}),
    "aug-mpnet-bi-bm25sem": ("mpnet-bi", "bm25+semantic", "augsbert", {}),
    "dse-mpnet-bi": ("mpnet-bi", "none", "dse", {}),
    "dse-gold": ("mpnet-bi", "none", "dse-gold", {}),  # alpha 0: the same DSE student on gold alone
    # Both students above stop at their last step, still improving: the same two with 4 epochs.
    "gold-only-e4": (None, "none", "augsbert", {"epochs": 4}),
    "aug-mpnet-bi-e4": ("mpnet-bi", "bm25", "augsbert", {"epochs": 4}),
    # BM25 silver is mostly dissimilar (mean 0.29, gold 0.56): the teacher labels 50,000 random pairs, and
    # KDE keeps a gold-shaped subset (sample.kde)
    "aug-mpnet-bi-kde": ("mpnet-bi", "kde", "augsbert", {}),
    "aug-mpnet-bi-bm25sem-e4": ("mpnet-bi", "bm25+semantic", "augsbert", {"epochs": 4}),  # the paper's pairs, 4 epochs
    # The 1-epoch MPNet teacher was still improving at its last step: a teacher trained 4 epochs, its student 4.
    "aug-mpnet-bi4-e4": ("mpnet-bi-e4", "bm25", "augsbert", {"epochs": 4}),
    "aug-mpnet-bi4": ("mpnet-bi-e4", "bm25", "augsbert", {}),  # ... its student 1 epoch, as the rows below
    # ... and on BM25 pairs over every STS-B training sentence (rows in ALL_SENTENCES): the same 1,000 gold
    # pairs, but the other 4,749 training pairs' sentences join the pool, unscored (semi-supervised)
    "aug-mpnet-bi4-allsent": ("mpnet-bi-e4", "bm25", "augsbert", {}),
    # Where the limit lies (issue 13): the same teacher labels given pairs instead of BM25's (stage sample
    # skipped; rows in POOLS). `pool`: the other STS-B training pairs (4,693), their scores never read (semi-
    # supervised: human-chosen pairs, machine labels). `oracle-test`: the test pairs themselves (1,375),
    # transductive, a diagnostic only: about the most this teacher's labels can give this student on test.
    "aug-mpnet-bi4-pool": ("mpnet-bi-e4", "none", "augsbert", {}),
    "oracle-test-mpnet-bi4": ("mpnet-bi-e4", "none", "augsbert", {}),
    "oracle-test-mpnet-bi4-e4": ("mpnet-bi-e4", "none", "augsbert", {"epochs": 4}),
    # The same students on sentence-transformers' trainers (student.trainer), against our loop's rows above.
    "gold-only-st": (None, "none", "augsbert", {"trainer": ST}),
    "aug-mpnet-bi-st": ("mpnet-bi", "bm25", "augsbert", {"trainer": ST}),
    "pruned-gold-only": (None, "none", "augsbert", PRUNED_STUDENT),
    "pruned-aug-mpnet-bi": ("mpnet-bi", "bm25", "augsbert", PRUNED_STUDENT),
    "pruned-aug-minilm-bi": ("minilm-bi", "bm25", "augsbert", PRUNED_STUDENT),
    "mpnet-cross": ("mpnet-cross", "none", "teacher-only", {}),
    "t-mpnet-bi-given": ("mpnet-bi-given", "none", "teacher-only", {}),  # teachers scored, no student
    "t-minilm-cross": ("minilm-cross", "none", "teacher-only", {}),
    "t-ensemble": ("ensemble", "none", "teacher-only", {}),
    "trans-mutual": (None, "none", "trans-encoder", {}),
}
# Rows whose candidate pairs come from all training sentences (their scores never read): new pairs only, the
# original 5,749 pairs excluded like gold pairs are.
ALL_SENTENCES = {"aug-mpnet-bi4-allsent"}
# Rows whose candidates are given pairs (see ROWS): the row, the pool it labels.
POOLS = {"aug-mpnet-bi4-pool": "train", "oracle-test-mpnet-bi4": "test", "oracle-test-mpnet-bi4-e4": "test"}
# Trans-Encoder with mutual distillation of MiniLM + MPNet (bi and cross each), reduced for a CPU: only the
# 1,000 training pairs (scores dropped) learned, inductive, where the paper learns dev and test pairs too
# (transductive); so the cross step is 63 steps, not thousands, and takes a larger step: lr 1e-4 (the
# paper's 2e-5 left a MiniLM cross-encoder at dev 23 after 63 steps, 1e-4 at 76); 2 bi epochs (not 10); one
# dev evaluation per epoch; bf16 where the CPU has it (auto; 2.0x faster for the MPNet cross step here).
TRANS = {"cycles": 3, "trans": {"mutual": [{"bi": MPNET, "cross": MPNET}], "bi": {"epochs": 2, "bf16": "auto"},
                                "cross": {"lr": 1.0e-4, "evals_per_epoch": 1, "bf16": "auto"}, "splits": ["train"]}}


def params_for(stsb: str, teacher_key: str | None, strategy: str, recipe: str, student: dict, top_k: int = 3,
               out: Path = Path("."), max_train: int | None = MAX_TRAIN):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["seed"] = SEED
    for section, values in BASE.items():
        raw[section].update(values)
    raw["data"].update({"dataset": "stsb", "source": stsb, "max_train": max_train} if stsb != "demo"
                       else {"dataset": "demo"})  # --stsb demo: the same rows on the embedded demo set
    raw["sample"]["strategy"] = strategy
    raw["sample"]["top_k"] = top_k
    raw["recipe"] = "dse" if recipe.startswith("dse") else "trans-encoder" if recipe == "trans-encoder" else "augsbert"
    if recipe == "trans-encoder":
        raw["cycles"] = TRANS["cycles"]
        for key, value in TRANS["trans"].items():
            raw["trans"][key] = {**raw["trans"][key], **value} if isinstance(value, dict) else value
    if recipe.startswith("dse"):  # the paper's 8 epochs; one dev evaluation per epoch (not 2), for CPU time
        raw["dse"]["evals_per_epoch"] = 1
    if recipe == "dse-gold":
        raw["dse"]["alpha"] = 0.0
    if teacher_key:
        raw["teacher"].update(json.loads(json.dumps(TEACHERS[teacher_key]).replace("{out}", str(out))))
    raw["student"].update(student)
    return parse_params(raw)


def timed(report: Path, fn, *args) -> float:
    """Run a stage function unless its report exists (resume); the seconds it took (0: reused)."""
    if report.is_file():
        return 0.0
    t0 = time.perf_counter()
    fn(*args)
    return round(time.perf_counter() - t0, 1)


def run_row(name: str, stsb: str, out: Path, max_train: int | None = MAX_TRAIN,
            student_seed: int | None = None) -> dict:
    """One row. ``student_seed``: the students (stages gold and distill) train under this seed instead of
    SEED, into folders suffixed -s<seed>; the data, teacher and silver stay SEED's."""
    tkey, strategy, recipe, student, *_ = row = ROWS[name]
    p = params_for(stsb, *row, out=out, max_train=max_train)
    ps = p if student_seed is None else p.model_copy(update={"seed": student_seed})
    sfx = seed_suffix(student_seed)
    top = "" if p.sample.top_k == 3 else f"-k{p.sample.top_k}"  # top-3 folders keep their first names
    base, clean = out / "base", out / "base/data/clean"
    seconds = {"download": timed(base / "download.json", download, p, base / "data/raw", base / "download.json")}
    seconds["augment"] = timed(base / "augment.json", augment, p, base / "data/raw", clean, base / "augment.json")
    skey = ("pruned" if student.get("layers") else "full") + (f"-e{student['epochs']}" if "epochs" in student
                                                             and not student.get("layers") else "")
    skey += "-st" if student.get("trainer") == ST else ""
    g = out / f"gold-{skey}{sfx}"
    seconds["gold"] = timed(g / "gold.json", gold, ps, clean, g / "model", g / "gold.json", g / "gold-dev.csv")
    pairs = out / f"pairs-{strategy}{top}"
    pool, pool_p = clean, p
    if name in ALL_SENTENCES:  # sample over every training sentence: a second base without max_train
        pool_p, pool = base_all(stsb, out, seconds, row)
        pairs, top = out / f"pairs-{strategy}{top}-allsent", f"{top}-allsent"
    if name in POOLS:  # given pairs, not sampled ones
        _, clean_all = base_all(stsb, out, seconds, row)
        pairs, top = out / f"pairs-pool-{POOLS[name]}", f"-pool-{POOLS[name]}"
        seconds["sample"] = timed(pairs / "sample.json", pool_pairs, POOLS[name], clean, clean_all, pairs)
    else:
        seconds["sample"] = timed(pairs / "sample.json", sample, pool_p, pool, out / "gold-full/model",
                                  pairs / "data", pairs / "sample.json")
    if recipe == "trans-encoder":
        if student_seed is not None:
            raise SystemExit(f"--student-seed: row {name} trains no gold-only or distilled student; run it without")
        return run_trans(name, p, out, clean, pairs, g, seconds)
    if tkey is None:  # the gold-only student is stage gold's model
        rdir = out / "rows" / (name + sfx)
        rdir.mkdir(parents=True, exist_ok=True)
        ep = p.evaluate
        model = BiEncoder.load(str(g / "model"), p.student.max_length)
        scored = {s: schemas.read(clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
        return {"row": name, "student": split_scores(model, scored, ep), "seconds": seconds,
                "start": split_scores(BiEncoder.load(p.student.model, p.student.max_length, layers=p.student.layers),
                                      scored, ep)}
    t = out / f"teacher-{tkey}"
    seconds["teacher"] = timed(t / "teacher.json", teacher, p, clean, t / "model", t / "teacher.json", t / "dev.csv")
    scored = {s: schemas.read(clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
    tscore_file = t / "scores.json"
    if not tscore_file.is_file():
        tscore_file.write_text(json.dumps(split_scores(Teacher.load(t / "model", p.teacher.max_length), scored,
                                                       p.evaluate)))
    tscores = json.loads(tscore_file.read_text())
    if recipe == "teacher-only":
        return {"row": name, "teacher": tscores, "seconds": seconds,
                "teacher_report": json.loads((t / "teacher.json").read_text())}
    lkey = f"silver-{tkey}-{strategy}{top}{'-dse' if recipe.startswith('dse') else ''}"
    s = out / lkey
    seconds["label"] = timed(s / "label.json", label, p, clean, pairs / "data", t / "model", s / "data",
                             s / "label.json", s / "density.csv")
    r = out / "rows" / (name + sfx)
    seconds["distill"] = timed(r / "distill.json", distill, ps, clean, pairs / "data", s / "data", t / "model",
                               r / "pseudo", r / "bi", r / "cross", r / "distill.json", r / "student-dev.csv",
                               r / "cycles.csv")
    # The student alone: the teacher's scores are above, the baselines are rows of their own (stage
    # evaluate would score the teacher again for every row: 9 minutes for MPNet on this CPU).
    scores = r / "scores.json"
    if not scores.is_file():
        student = DSE.load(r / "bi") if (r / "bi" / HEAD_DIR).is_dir() else BiEncoder.load(str(r / "bi"),
                                                                                             p.student.max_length)
        scores.write_text(json.dumps(split_scores(student, scored, p.evaluate)))
    result = {"row": name, "student": json.loads(scores.read_text()), "teacher": tscores, "seconds": seconds,
              "label": {k: v for k, v in json.loads((s / "label.json").read_text()).items() if k != "histogram"},
              "distill": json.loads((r / "distill.json").read_text())}
    return result


def seed_suffix(student_seed: int | None) -> str:
    """How a row's folders and results key name a --student-seed run."""
    return "" if student_seed is None else f"-s{student_seed}"


def base_all(stsb: str, out: Path, seconds: dict, row: tuple) -> tuple:
    """OUT/base-all: the same data with every training pair (no max_train); its params and clean folder."""
    p = params_for(stsb, *row, out=out, max_train=None)
    b, clean = out / "base-all", out / "base-all/data/clean"
    seconds["download-all"] = timed(b / "download.json", download, p, b / "data/raw", b / "download.json")
    seconds["augment-all"] = timed(b / "augment.json", augment, p, b / "data/raw", clean, b / "augment.json")
    return p, clean


def pool_pairs(kind: str, clean: Path, clean_all: Path, out: Path) -> None:
    """Candidates that are given pairs (their scores dropped), minus the gold pairs: ``train``, the training
    pairs that max_train left out; ``test``, the test pairs (a transductive diagnostic, never a method)."""
    gold = schemas.read(clean / "train.parquet", schemas.PAIRS)
    given = schemas.read((clean_all if kind == "train" else clean) / f"{kind}.parquet", schemas.PAIRS)
    pairs = new_pairs(zip(given["sentence1"], given["sentence2"]), gold, f"pool-{kind}")
    schemas.write(out / "data" / schemas.CANDIDATES_FILE, pairs, schemas.CANDIDATES)
    write_json(out / "sample.json", {"strategy": f"pool-{kind}", "given": len(given), "gold_pairs": len(gold),
                                     "candidates": len(pairs)})


def run_trans(name: str, p, out: Path, clean: Path, pairs: Path, g: Path, seconds: dict) -> dict:
    """The Trans-Encoder rows: stage distill runs the cycles (its store under OUT/store, so it resumes)."""
    import os

    from pldistill.recipes.trans_encoder import skip_teacher
    os.environ["PLDISTILL_STORE"] = str(out / "store")
    r = out / "rows" / name
    skip_teacher(r / "teacher", r / "teacher-dev.csv", "trans-encoder: no teacher")
    seconds["distill"] = timed(r / "distill.json", distill, p, clean, pairs / "data", r / "silver", r / "teacher",
                               r / "pseudo", r / "bi", r / "cross", r / "distill.json", r / "student-dev.csv",
                               r / "cycles.csv")
    seconds["evaluate"] = timed(r / "eval.json", evaluate, p, clean, r / "bi", r / "cross", r / "teacher",
                                g / "model", r / "eval.json", r / "pred.csv")
    d = json.loads((r / "distill.json").read_text())
    return {"row": name, "student": json.loads((r / "eval.json").read_text())["bi"], "seconds": seconds,
            "start": d["start"], "per_cycle": d["per_cycle"], "selected": d["selected"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stsb", required=True, help="the official STS Benchmark archive (Stsbenchmark.tar.gz); "
                    "`demo`: the embedded demo set instead")
    ap.add_argument("--out", type=Path, default=Path("/tmp/teachers-stsb"), help="where every model and report goes")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of: {', '.join(ROWS)}")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    ap.add_argument("--results", default="results.json", help="file under --out for this run's rows")
    ap.add_argument("--student-seed", type=int, default=None, help="train the students (gold-only and "
                    "distilled) under this seed, the rest under SEED: seed noise of a row's student")
    ap.add_argument("--max-train", type=int, default=MAX_TRAIN, help=f"gold training pairs (default {MAX_TRAIN}); "
                    "another value needs its own --out (the data and every model depend on it)")
    args = ap.parse_args()
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    from pldistill.models import native_bf16
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    print(f"cpu flags: avx512f={'avx512f' in flags} avx512_bf16={'avx512_bf16' in flags} "
          f"amx_bf16={'amx_bf16' in flags} -> native bf16: {native_bf16()}")
    results_file = args.out / args.results
    results = json.loads(results_file.read_text()) if results_file.is_file() else {}
    for name in args.rows.split(","):
        t0 = time.perf_counter()
        key = name + seed_suffix(args.student_seed)
        results[key] = run_row(name, args.stsb, args.out, args.max_train, args.student_seed)
        results[key]["wall_seconds"] = round(time.perf_counter() - t0, 1)
        results_file.parent.mkdir(parents=True, exist_ok=True)
        results_file.write_text(json.dumps(results, indent=2))
        print(json.dumps({key: {k: results[key].get(k) for k in ("student", "teacher", "wall_seconds")}}))
    print("\n| row | student test (dev) | teacher test (dev) |\n|---|---|---|")

    def cell(b: dict | None) -> str:
        return f"{b['test']['spearman']:.2f} ({b['dev']['spearman']:.2f})" if b else ""

    for name, r in results.items():
        print(f"| {name} | {cell(r.get('student'))} | {cell(r.get('teacher'))} |")


if __name__ == "__main__":
    main()
