"""A fast student that keeps its teacher's quality (issue 24), on STS Benchmark: the README's table.

The 3-layer MiniLM (layers [0, 2, 4] of all-MiniLM-L6-v2, about 2x its encode speed) learns from the whole
MiniLM used as given (a bi-encoder teacher), on 1,000 gold training pairs (996 after cleaning). The other
STS-B training pairs are the given pairs (data.unscored: rest), their scores never read. Rows differ only
in what the student learns: gold only; + the teacher's embeddings (stage embed); + the teacher's labels of
the given pairs (sample.strategy given); + a corpus of plain sentences (--corpus, see benchmarks/corpus.py);
embed-cycles: cycles 5, each later cycle learning pairs the student mined (params.yaml's rounds section;
OUT/rows/embed-cycles-s*/distill.json has every cycle); embed-sim-*: the embedding step matches the in-batch
cosine matrices (no projection; for a teacher of another width); dse-*: recipe dse; trans-encoder and
rtt-ensemble: the unsupervised recipes on the same sentences (UNSUPERVISED below); trans-encoder-mutual: with the
whole MiniLM as a second member (MUTUAL).
--teacher bundled:all-mpnet-base-v2 (after `make mpnet`) runs the rows with the MPNet teacher, in folders of
their own; --teacher-epochs N fine-tunes the teacher on the gold pairs first (N epochs, one dev evaluation each,
best dev kept). --student whole trains the whole MiniLM instead (lr 2e-5, 4 epochs: its gold-only student
improves on dev that long; embed lr 1e-4). --embed-teacher SPEC (embed.teacher) has the student learn SPEC's
embeddings while the teacher labels its pairs (e.g. the whole MiniLM's embeddings, a fine-tuned MPNet's labels).
--layers 0,5 cuts the pruned student otherwise (two layers: the 2x that three of six cannot reach,
docs/fast-student.md).
--fp32 encodes, labels and scores dev in fp32 on a CPU with native bf16 units too (bf16 auto is on there), so
rows compare with rows made on a CPU without them; OUT keeps the encoding it was made with (OUT/encoding.txt)
and refuses a run that encodes otherwise.

Each row runs the pipeline's own stage functions with the row's params; stages whose params a row shares
with an earlier one are copied from it, and a stage whose report exists is skipped, so a killed run resumes.
Prints a Markdown table and writes OUT/results.json.

    python benchmarks/fast_student.py --stsb ../shared/data/Stsbenchmark.tar.gz --out /tmp/fast-student
    python benchmarks/fast_student.py --stsb ... --rows gold-only,embed-given --seeds 42,43,44
    python benchmarks/fast_student.py --stsb ... --rows embed-cycles
    python benchmarks/fast_student.py --stsb ... --rows embed-corpus-given --corpus /tmp/corpus.txt --max-corpus 20000
    python benchmarks/fast_student.py --stsb ... --rows embed-gold --teacher bundled:all-mpnet-base-v2
    python benchmarks/fast_student.py --stsb ... --rows embed-given --teacher bundled:all-mpnet-base-v2 \
        --teacher-epochs 4 --embed-teacher bundled:all-MiniLM-L6-v2
    python benchmarks/fast_student.py --stsb ... --rows gold-only,embed-given --layers 0,5 \
        --teacher bundled:all-mpnet-base-v2 --teacher-epochs 4 --embed-teacher bundled:all-MiniLM-L6-v2
    python benchmarks/fast_student.py --stsb ... --rows gold-only,embed-sim-gold --student whole \
        --teacher bundled:all-mpnet-base-v2 --teacher-epochs 4
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
import yaml
from teachers_stsb import timed as once  # benchmarks/: the script's own folder is on sys.path

from pldistill import schemas
from pldistill.config import Params, TrainParams, parse_params
from pldistill.device import cpu_flags
from pldistill.io import atomic_path, write_json
from pldistill.models import BiEncoder, native_bf16
from pldistill.recipes import registry
from pldistill.recipes.base import encode_speed
from pldistill.training import split_scores
from stages.augment import augment
from stages.distill import distill
from stages.download import download
from stages.embed import embed
from stages.gold import gold
from stages.label import label
from stages.sample import sample
from stages.teacher import teacher

ROOT = Path(__file__).resolve().parents[1]
DATA_SEED = 42  # the gold subset and the given pairs are the same for every student seed
MINILM = "bundled:all-MiniLM-L6-v2"
# Every row: the pruned student as params.yaml trains it (lr 1e-4, 2 epochs), the whole MiniLM as given.
COMMON = {
    "data": {"dataset": "stsb", "max_train": 1000, "unscored": "rest"},
    "teacher": {"model": MINILM, "kind": "bi", "finetune": False, "members": [], "layers": None},
    "student": {"model": MINILM, "layers": [0, 2, 4]},
}
EMBED = {"epochs": 3, "lr": 2.0e-4}  # the embedding step of the rows that have one
# sim: the in-batch cosine matrices, no projection; for a teacher of another width (MPNet's 768, projected by
# PCA under mse, is a space the student must learn anew: 10k sentences are too few for that)
EMBED_SIM = {**EMBED, "loss": "sim"}
# Students: the student section's changes from COMMON, and the embedding step's lr. The whole model keeps
# params.yaml's embed lr (1e-4) and a whole model's lr (2e-5); its gold-only student rises on dev for 4 epochs.
STUDENTS = {"pruned": ({}, EMBED["lr"]), "whole": ({"layers": None, "lr": 2.0e-5, "epochs": 4}, 1.0e-4)}
# --fp32: every encoding key whose default is bf16 auto, off (training is fp32 already). On a CPU with native bf16
# units, auto encodes, labels and scores dev in bf16; on one without, in fp32: rows from both machines then compare.
FP32 = {("augment", "rtt"), ("sample", "semantic"), ("label",), ("evaluate",)}
# Rows: sample.strategy, the embed section (None: off), whether --corpus joins the sentences, cycles (later
# cycles: the student mines pairs by semantic search, the teacher labels them; params.yaml's rounds section),
# the recipe (dse: the student scores through a learned head, trained on the teacher's logits and gold).
ROWS = {
    "gold-only": ("none", None, False, 1, "augsbert"),
    "given": ("given", None, False, 1, "augsbert"),
    "embed-gold": ("none", EMBED, False, 1, "augsbert"),
    "embed-given": ("given", EMBED, False, 1, "augsbert"),
    "embed-corpus-given": ("given", EMBED, True, 1, "augsbert"),
    "embed-sim-gold": ("none", EMBED_SIM, False, 1, "augsbert"),
    "embed-sim-given": ("given", EMBED_SIM, False, 1, "augsbert"),
    "embed-cycles": ("none", EMBED, False, 5, "augsbert"),
    "dse-gold": ("none", None, False, 1, "dse"),
    "dse-embed-gold": ("none", EMBED, False, 1, "dse"),
    "dse-embed-given": ("given", EMBED, False, 1, "dse"),
    "trans-encoder": ("given", None, False, 1, "trans-encoder"),
    "trans-encoder-2": ("given", None, False, 2, "trans-encoder"),  # resumes the first cycle from the store
    "trans-encoder-mutual": ("given", None, False, 1, "trans-encoder"),  # + the whole MiniLM as a member (MUTUAL)
    "rtt-ensemble": ("none", None, False, 1, "rtt-ensemble"),
}
# The unsupervised recipes on the student's own sentences (the gold pairs' and the given pairs', no score read):
# trans-encoder: the student (bi) and a cross-encoder started from the teacher label the pairs for each other, one
# cycle (trans-encoder-2: two); the student's lr is its own (the paper's 5e-5 is a whole model's), 3 epochs (the
# paper's 10 do not fit this CPU). rtt-ensemble: the sub-models are dropout views (no MT model offline) of the
# student's own start (the cut MiniLM: a whole MiniLM's SimCSE lowers it, docs/results.md), at the student's lr;
# the student learns the ensemble's embeddings as the embedding step learns the teacher's (3 epochs, its lr).
UNSUPERVISED = {
    "trans-encoder": {"trans": {"splits": ["train"], "sampled": True, "bi": {"epochs": 3}}},
    "rtt-ensemble": {"ensemble": {"distill": {"epochs": EMBED["epochs"]}}},
}
# Mutual distillation with a ready-made whole model: the whole MiniLM is a second member (its own bi-encoder and a
# second cross-encoder from the same weights, trained on another data order). The bi labels are the mean of the
# cut student's and the whole MiniLM's; the cross labels the mean of the two cross-encoders'. The row's student
# is still the first member, the cut one.
MUTUAL = {"trans-encoder-mutual": {"trans": {"mutual": [{"bi": MINILM}]}}}


def params_for(stsb: str, row: str, seed: int, corpus: str | None, tutor: str = MINILM, tutor_epochs: int = 0,
               pupil: str = "pruned", max_corpus: int | None = None, embedder: str | None = None,
               layers: list[int] | None = None, fp32: bool = False) -> Params:
    strategy, emb, with_corpus, cycles, recipe = ROWS[row]
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["cycles"] = cycles
    raw["recipe"] = recipe
    for section, values in COMMON.items():
        raw[section].update(values)
    raw["teacher"]["model"] = tutor
    if tutor_epochs:  # fine-tuned on the gold pairs; one dev evaluation an epoch (MPNet's are minutes each here)
        raw["teacher"].update({"finetune": True, "epochs": tutor_epochs, "evals_per_epoch": 1})
    student, embed_lr = STUDENTS[pupil]
    raw["student"].update(student)
    if layers is not None:  # --layers: another cut of the same model
        raw["student"]["layers"] = layers
    for path in FP32 if fp32 else ():
        section = raw
        for key in path:
            section = section[key]
        section["bf16"] = False
    raw["dse"]["lr"] = raw["student"]["lr"]  # DSE's 1e-5 is the paper's, for a whole BERT; the student's own lr
    raw["trans"]["bi"]["lr"] = raw["ensemble"]["sub"]["lr"] = raw["student"]["lr"]
    raw["ensemble"]["distill"]["lr"] = embed_lr
    for section, values in [*UNSUPERVISED.get(recipe, {}).items(), *MUTUAL.get(row, {}).items()]:
        for key, value in values.items():
            raw[section][key] = {**raw[section][key], **value} if isinstance(value, dict) else value
    emb = emb and {**emb, "lr": embed_lr}
    raw["data"]["source"] = stsb
    raw["seed"] = seed
    raw["sample"]["strategy"] = strategy
    raw["embed"].update({**(emb or {"epochs": 0}), "corpus": corpus if with_corpus else None,
                         "max_corpus": max_corpus if with_corpus else None, "teacher": embedder})
    if with_corpus and not corpus:
        raise SystemExit(f"row {row} needs --corpus (python benchmarks/corpus.py --out ...)")
    return parse_params(raw)


def saved_start(folder: Path, sp: TrainParams) -> Path:
    """The student's starting model (student.model less the layers it drops) saved once in ``folder``."""
    if not (folder / "config.json").is_file():
        BiEncoder.load(sp.model, sp.max_length, sp.trust_remote_code, sp.layers).save(folder)
    return folder


def short(spec: str) -> str:
    """A model spec as a folder-name suffix: ``bundled:all-mpnet-base-v2`` -> ``-all-mpnet-base-v2``."""
    return "-" + spec.removeprefix("bundled:").replace("/", "_")


def run_row(row: str, seed: int, stsb: str, out: Path, corpus: str | None, tutor: str = MINILM,
            tutor_epochs: int = 0, pupil: str = "pruned", max_corpus: int | None = None,
            embedder: str | None = None, layers: list[int] | None = None, fp32: bool = False) -> dict:
    strategy, emb, with_corpus, _, recipe = ROWS[row]
    recipe_ = registry.get(recipe)
    base, clean = out / "base", out / "base/data/clean"
    # another teacher, or student: folders of their own for what they touch (teacher, labels, embeddings, rows)
    tag = "" if tutor == MINILM else short(tutor)
    tag += f"-ft{tutor_epochs}" if tutor_epochs else ""
    etag = f"-emb{short(embedder)}" if embedder else tag  # whose embeddings stage embed learns
    p = params_for(stsb, row, seed, corpus, tutor, tutor_epochs, pupil, max_corpus, embedder, layers, fp32)
    # another student: folders of its own for what it touches (gold, embed, rows, the rtt sub-models' start)
    who = ("" if pupil == "pruned" else f"-{pupil}") + ("" if layers is None else "-L" + "-".join(map(str, layers)))
    if recipe == "rtt-ensemble":  # the sub-models start where the student starts
        start = saved_start(base / f"start{who}", p.student)
        p = p.model_copy(update={"teacher": p.teacher.model_copy(update={"model": str(start)})})
    data_p = p.model_copy(update={"seed": DATA_SEED})
    ttag = tag + (f"-{recipe}" if recipe in UNSUPERVISED else "")  # their stage teacher trains their own, or none
    drawn = f"{max_corpus}" if with_corpus and max_corpus else ""  # embed.max_corpus: its own folders and row
    # gold-only: the same student whatever the teacher
    name = row + drawn + ("" if row == "gold-only" else tag + (etag if embedder and emb else "")) + who
    t = {"download": once(base / "download.json", download, data_p, base / "data/raw", base / "download.json")}
    t["augment"] = once(base / "augment.json", augment, data_p, base / "data/raw", clean, base / "augment.json")
    tdir = base / f"teacher{ttag}"
    t["teacher"] = once(base / f"teacher{ttag}.json", teacher, data_p, clean, tdir, base / f"teacher{ttag}.json",
                        base / f"teacher{ttag}-dev.csv")
    g = out / f"gold-s{seed}{who}"
    t["gold"] = once(g / "gold.json", gold, p, clean, g / "model", g / "gold.json", g / "dev.csv")
    pairs = out / f"pairs-{strategy}"
    t["sample"] = once(pairs / "sample.json", sample, data_p, clean, g / "model", pairs / "data", pairs / "sample.json")
    silver = out / f"silver-{strategy}{tag}{'' if recipe == 'augsbert' else '-' + recipe}"  # dse: + gold logits
    t["label"] = once(silver / "label.json", label, data_p, clean, pairs / "data", tdir, silver / "data",
                      silver / "label.json", silver / "density.csv")
    loss = "" if not emb or emb.get("loss", "mse") == "mse" else f"{emb['loss']}-"
    e = out / (f"embed-{loss}{f'corpus{drawn}-' if with_corpus else ''}s{seed}{etag}{who}" if emb
               else f"embed-off{who}")
    t["embed"] = once(e / "embed.json", embed, p, clean, tdir, e / "data", e / "model", e / "embed.json",
                      e / "dev.csv")
    r = out / "rows" / f"{name}-s{seed}"
    if row == "gold-only":  # the gold-only student is stage gold's model
        r.mkdir(parents=True, exist_ok=True)
        if not (r / "distill.json").is_file():
            shutil.copytree(g / "model", r / "bi", dirs_exist_ok=True)
            write_json(r / "distill.json", json.loads((g / "gold.json").read_text()))
    t["distill"] = once(r / "distill.json", distill, p, clean, pairs / "data", silver / "data", tdir,
                        r / "pseudo", r / "bi", r / "cross", r / "distill.json", r / "dev.csv", r / "cycles.csv",
                        e / "model")
    scored = {s: schemas.read(clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
    scores = r / "scores.json"
    if not scores.is_file():
        student = recipe_.student(p, r / "bi")  # DSE's scores through its head
        speed = (encode_speed(BiEncoder.load(str(r / "bi"), p.student.max_length), p.student, scored["dev"],
                              p.evaluate) if p.student.layers else None)  # the encoder's, against the whole model
        write_json(scores, {"student": split_scores(student, scored, p.evaluate), "speed": speed})
    # the teacher: the stage's first member, its cosine uncalibrated; rtt-ensemble's ensemble; trans-encoder's
    # selected cross-encoder, one per row
    tscores = r / "teacher-scores.json" if recipe == "trans-encoder" else base / f"teacher{ttag}-scores.json"
    if not tscores.is_file():
        tutor_model = (recipe_.teacher_model(p, r / "cross", tdir) if recipe in UNSUPERVISED
                       else BiEncoder.load(str(tdir / "member-00"), p.teacher.max_length))
        write_json(tscores, split_scores(tutor_model, scored, p.evaluate))
    embed_report = json.loads((e / "embed.json").read_text())
    # the stage report keeps no timing (write_report: reruns give the same bytes)
    per_cycle = [{k: c[k] for k in ("cycle", "dev", "test", "silver_pairs", "steps", "best_step", "mined", "bi",
                                    "cross") if k in c}
                 for c in json.loads((r / "distill.json").read_text()).get("per_cycle", [])]
    return {"row": name, "seed": seed, **({"per_cycle": per_cycle} if per_cycle else {}),
            **json.loads(scores.read_text()), "teacher": json.loads(tscores.read_text()),
            "embed_only": embed_report.get("after"), "embed_sentences": embed_report.get("by_source"),
            "silver_pairs": json.loads((silver / "label.json").read_text()).get("silver_pairs"), "seconds": t}


def same_encoding(out: Path, fp32: bool, native: bool) -> str:
    """How this run encodes (fp32, or bf16 where the CPU has the units and --fp32 is off), checked against what
    ``out`` was made with: its folders are reused by name, so a run that encodes otherwise needs another --out."""
    mode = "fp32" if fp32 or not native else "bf16 auto"
    marker = out / "encoding.txt"
    made = marker.read_text().strip() if marker.is_file() else None
    if made not in (None, mode):
        raise SystemExit(f"{out} was made encoding in {made}; this run encodes in {mode} "
                         f"({'--fp32' if fp32 else 'no --fp32'}, native bf16 {native}): give it another --out")
    with atomic_path(marker) as tmp:
        tmp.write_text(mode + "\n")
    return mode


def table(results: list[dict]) -> str:
    lines = ["| row | seed | test | dev | embedding step alone (test) | speed-up | silver pairs |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        alone = r["embed_only"]["test"]["spearman"] if r["embed_only"] else ""
        speedup = f"{r['speed']['speedup']}x" if r["speed"] else "1x (whole)"
        lines.append(f"| {r['row']} | {r['seed']} | {r['student']['test']['spearman']} | "
                     f"{r['student']['dev']['spearman']} | {alone} | {speedup} | {r['silver_pairs']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stsb", required=True, help="the official STS Benchmark archive (Stsbenchmark.tar.gz)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--seeds", default="42")
    ap.add_argument("--corpus", default=None, help="a .txt of plain sentences (benchmarks/corpus.py makes one)")
    ap.add_argument("--max-corpus", type=int, default=None,
                    help="embed.max_corpus: at most this many of the corpus' sentences, drawn with the seed")
    ap.add_argument("--embed-teacher", default=None,
                    help="embed.teacher: the bi-encoder whose embeddings the student learns (default: the teacher)")
    ap.add_argument("--teacher", default=MINILM,
                    help="the teacher, used as given (bundled:all-mpnet-base-v2 after make mpnet)")
    ap.add_argument("--teacher-epochs", type=int, default=0, help="0: the teacher as given; N: fine-tuned N epochs")
    ap.add_argument("--student", choices=list(STUDENTS), default="pruned",
                    help="pruned: MiniLM layers [0, 2, 4] (lr 1e-4, 2 epochs); whole: all six (lr 2e-5, 4 epochs)")
    ap.add_argument("--layers", default=None,
                    help="the pruned student's layers instead of 0,2,4, e.g. 0,5 (folders and rows of their own)")
    ap.add_argument("--fp32", action="store_true",
                    help="encode, label and score in fp32 on a CPU with native bf16 units too (bf16 auto is on there)")
    a = ap.parse_args()
    layers = None if a.layers is None else [int(x) for x in a.layers.split(",")]
    if layers is not None and a.student != "pruned":
        raise SystemExit("--layers cuts the pruned student; --student whole keeps every layer")
    flags = {"cpu": cpu_flags(), "native_bf16": native_bf16(), "torch_threads": torch.get_num_threads(),
             "encoding": same_encoding(a.out, a.fp32, native_bf16())}
    print(json.dumps(flags))
    results = []
    for seed in map(int, a.seeds.split(",")):
        for row in a.rows.split(","):
            results.append(run_row(row, seed, str(Path(a.stsb).resolve()), a.out, a.corpus, a.teacher,
                                   a.teacher_epochs, a.student, a.max_corpus, a.embed_teacher, layers, a.fp32))
            print(table(results[-1:]).splitlines()[-1], flush=True)
    # results.json keeps the rows of earlier invocations (by row and seed), this one's replacing theirs
    done = a.out / "results.json"
    kept = [r for r in (json.loads(done.read_text())["rows"] if done.is_file() else [])
            if (r["row"], r["seed"]) not in {(x["row"], x["seed"]) for x in results}]
    write_json(done, {"flags": flags, "rows": kept + results})
    print(table(results))
    for r in results:
        for c in r.get("per_cycle", []):
            if "bi" in c:  # trans-encoder: its selected student and cross-encoder of the cycle
                steps = [f"{m['step']} test {m['test']['spearman']}, dev {m['dev']['spearman']}"
                         for m in c["bi"] + c["cross"]]
                print(f"{r['row']} seed {r['seed']} cycle {c['cycle']}: " + "; ".join(steps))
                continue
            print(f"{r['row']} seed {r['seed']} cycle {c['cycle']}: test {c['test']['spearman']}, "
                  f"dev {c['dev']['spearman']}, {c['silver_pairs']} silver pairs, best step {c['best_step']}")


if __name__ == "__main__":
    main()
