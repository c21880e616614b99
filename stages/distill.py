"""distill: train the student the recipe asks for; writes data/pseudo (what was learned, per cycle),
models/bi, models/cross and a score-per-cycle plot.

- augsbert: the bi-encoder learns gold + the teacher's silver labels; models/cross is the teacher.
  Under domain adaptation it learns the target's silver labels only.
- dse: a DSE student (encoder + learned similarity head) learns the teacher's logits mixed with the
  gold labels (weight dse.alpha); models/bi holds it with its head, models/cross is the teacher.
- rtt-ensemble: a bi-encoder learns the ensemble's sentence embeddings (MAE + a little InfoNCE);
  models/cross holds a note (this recipe has no cross-encoder), data/pseudo the embeddings learned.
- trans-encoder: `cycles` rounds of bi-encoder -> cross-encoder -> bi-encoder labelling, no gold
  score used for training; the best bi- and cross-encoder on dev become models/bi and models/cross.
  Finished steps live in a store outside DVC's outputs (pldistill.store), so a rerun resumes.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd

from pldistill import cards, ensemble, schemas
from pldistill.config import EvaluateParams, Params, TrainParams
from pldistill.cycles import LABELS, Step, TransEncoder, run_fingerprint, unlabelled_pairs
from pldistill.datasets import gold_dir, task_of
from pldistill.dse import DSE
from pldistill.io import atomic_dir, write_card, write_csv_rows, write_json, write_note_dir
from pldistill.models import BiEncoder
from pldistill.runtime import run_stage, seed_all
from pldistill.store import Store
from pldistill.teachers import Teacher
from pldistill.training import dev_spearman, fit, fit_at, split_scores, train_bi_encoder

CYCLE_COLUMNS = ["cycle", "bi_dev", "bi_test", "cross_dev", "cross_test"]


def _copy_dir(src: Path, dst: Path, card: str | None = None) -> None:
    """Copy a model directory whole; ``card`` replaces its README.md."""
    with atomic_dir(dst) as tmp:
        shutil.copytree(src, tmp, dirs_exist_ok=True)
        write_card(tmp, card)


def _row(cycle: int, bi: dict | None, cross: dict | None) -> list:
    """One line of the score-per-cycle plot: Spearman x100 on dev and test (blank where no model)."""
    return [cycle, *(("" if b is None else b[s]["spearman"]) for b in (bi, cross) for s in ("dev", "test"))]


def _teacher_as_cross(teacher: Teacher, path: Path, cross: Path) -> None:
    """models/cross: the teacher, when it is one cross-encoder; else a note pointing at models/teacher."""
    if teacher.cross_dir:
        _copy_dir(path / teacher.cross_dir, cross)
    else:
        write_note_dir(cross, "the teacher is not one cross-encoder: " + "; ".join(m.describe for m in teacher.members)
                       + f". It lives in {path} (pldistill.teachers.Teacher.load)")


def encode_speed(student: BiEncoder, sp: TrainParams, dev: pd.DataFrame, ep: EvaluateParams) -> dict:
    """A pruned student's encoding speed against its full starting model, on the dev sentences (best of 3)."""
    full = BiEncoder.load(sp.model, sp.max_length, sp.trust_remote_code)
    sentences = list(dict.fromkeys([*dev["sentence1"], *dev["sentence2"]]))

    def per_s(model: BiEncoder) -> float:
        best = math.inf
        for _ in range(3):
            t0 = time.perf_counter()
            model.encode(sentences, ep.batch_size, ep.bf16)
            best = min(best, time.perf_counter() - t0)
        return len(sentences) / best

    pruned_s, full_s = per_s(student), per_s(full)
    return {"layers": list(sp.layers), "full_layers": full.model[0].auto_model.config.num_hidden_layers,
            "sentences": len(sentences), "sentences_per_s": {"pruned": round(pruned_s, 1), "full": round(full_s, 1)},
            "speedup": round(pruned_s / full_s, 2)}


def augsbert(params: Params, clean: Path, silver: Path, teacher: Path, pseudo: Path, bi: Path, cross: Path,
             report: Path, curve: Path, cycles_plot: Path) -> dict:
    """Train the student bi-encoder with a cosine-similarity MSE on gold + silver; under domain adaptation
    on the target's silver only, selected on the source's dev set (no target label is used)."""
    adapting = params.adapt.data
    gold = schemas.read(clean / "train.parquet", schemas.PAIRS)
    if adapting:  # the target's gold scores are never learned
        gold = gold.iloc[:0]
    scored = {s: schemas.read(clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
    select_on = schemas.read(gold_dir(params, clean) / "dev.parquet", schemas.PAIRS)
    labelled = schemas.read(silver / schemas.SILVER_FILE, schemas.PSEUDO)
    s1 = [*gold["sentence1"], *labelled["sentence1"]]
    s2 = [*gold["sentence2"], *labelled["sentence2"]]
    y = [*gold["score"], *labelled["score"]]
    student, res = train_bi_encoder(params.student, params.evaluate, s1, s2, y, select_on, params.seed, desc="student")
    sp = params.student
    teacher_model = Teacher.load(teacher, params.teacher.max_length)
    student.save(bi, cards.card("Augmented-SBERT student", "bi", sp.model, {
        "dataset": params.data.name, **({"adapted from": adapting.name} if adapting else {}),
        "gold pairs": len(gold), "silver pairs": len(labelled),
        "sampling": params.sample.strategy, "teacher": " + ".join(m.describe for m in teacher_model.members),
        "loss": "MSE of the cosine to the gold or silver score", **cards.fit_facts(res.summary(), sp),
        "seed": params.seed},
        f"A bi-encoder trained on {params.data.name}'s pairs labelled by a teacher that learned {adapting.name}."
        if adapting else "A bi-encoder trained on gold pairs and on new pairs its teacher labelled."))
    _teacher_as_cross(teacher_model, teacher, cross)
    with atomic_dir(pseudo) as tmp:  # the silver labels the student learned in its one cycle
        schemas.write(tmp / schemas.pseudo_file(1), labelled, schemas.PSEUDO)
    ep = params.evaluate
    start = BiEncoder.load(sp.model, sp.max_length, sp.trust_remote_code, sp.layers)
    write_csv_rows(cycles_plot, CYCLE_COLUMNS, [_row(0, split_scores(start, scored, ep), None),
                                                _row(1, split_scores(student, scored, ep),
                                                     split_scores(teacher_model, scored, ep))])
    res.write_curve(curve)
    result = {"recipe": "augsbert", "cycle": 1, **({"adapt": adapting.name} if adapting else {}),
              "gold_pairs": len(gold), "silver_pairs": len(labelled), **res.summary(),
              **({"pruned": encode_speed(student, sp, scored["dev"], ep)} if sp.layers is not None else {})}
    write_json(report, result)
    return result


def _dse_rows(gold: pd.DataFrame, on_gold: pd.DataFrame, labelled: pd.DataFrame, gold_file: Path,
              silver: Path) -> pd.DataFrame:
    """Gold pairs (with their teacher logits and gold scores), then silver pairs (gold NaN)."""
    logits_file = silver / schemas.GOLD_LOGITS_FILE
    same = len(on_gold) == len(gold) and all((on_gold[c].to_numpy() == gold[c].to_numpy()).all()
                                             for c in ("sentence1", "sentence2"))
    if not same:
        raise schemas.SchemaError(f"{logits_file}: does not follow {gold_file} row by row; rerun stage label "
                                  "(`dvc repro -f -s label`)")
    for name, df in ((logits_file, on_gold), (silver / schemas.SILVER_FILE, labelled)):
        if df["logit"].isna().any():
            raise schemas.SchemaError(f"{name}: column 'logit' has {int(df['logit'].isna().sum())} null value(s); "
                                      "DSE learns the teacher's logit for every pair")
    return pd.concat([on_gold.assign(gold=gold["score"].to_numpy()), labelled.assign(gold=np.nan)], ignore_index=True)


def dse(params: Params, clean: Path, silver: Path, teacher: Path, pseudo: Path, bi: Path, cross: Path,
        report: Path, curve: Path, cycles_plot: Path) -> dict:
    """Train the DSE student on the teacher's logits (all pairs) mixed with the gold labels (gold pairs)."""
    dp = params.dse
    _, gen = seed_all(params.seed)  # also the head's init
    gold = schemas.read(clean / "train.parquet", schemas.PAIRS)
    scored = {s: schemas.read(clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
    on_gold = schemas.read(silver / schemas.GOLD_LOGITS_FILE, schemas.PSEUDO)
    labelled = schemas.read(silver / schemas.SILVER_FILE, schemas.PSEUDO)
    rows = _dse_rows(gold, on_gold, labelled, clean / "train.parquet", silver)
    target = rows[["logit", "gold"]].to_numpy(dtype=np.float32)  # (pairs, 2): teacher logit, gold or NaN
    student = DSE.create(params.student.model, dp.pooling, dp.hidden, dp.max_length, params.student.trust_remote_code,
                         params.student.layers)
    task = task_of(params.data, gold)
    res = fit(student.module, student.dse_loss_fn(dp.alpha, task), list(rows["sentence1"]), list(rows["sentence2"]),
              target, dev_spearman(student, scored["dev"], params.evaluate), dp, gen, desc="dse student",
              lr_by_prefix={"head": dp.head_lr})
    student.save(bi, cards.card("DSE student", "bi", params.student.model, {
        "dataset": params.data.name, "gold pairs": len(gold), "silver pairs": len(labelled), "alpha": dp.alpha,
        "pooling": dp.pooling, "head": f"[u, v, u*v, |u-v|] -> {dp.hidden} (ReLU) -> logit",
        "loss": "alpha (S - T)^2 + (1 - alpha) loss on gold; (S - T)^2 on silver",
        **cards.fit_facts(res.summary(), dp), "seed": params.seed},
        "A Distilled Sentence Embedding student. Load it with `pldistill.dse.DSE.load(path)` to score pairs "
        "through its learned head (from cached embeddings); plain `SentenceTransformer(path)` loads the "
        "encoder alone, with mean pooling and cosine."))
    teacher_model = Teacher.load(teacher, params.teacher.max_length)
    _teacher_as_cross(teacher_model, teacher, cross)
    with atomic_dir(pseudo) as tmp:  # what the student learned: the teacher's logits on gold and silver pairs
        schemas.write(tmp / schemas.pseudo_file(1), rows.drop(columns="gold"), schemas.PSEUDO)
    ep = params.evaluate
    write_csv_rows(cycles_plot, CYCLE_COLUMNS, [_row(1, split_scores(student, scored, ep),
                                                     split_scores(teacher_model, scored, ep))])
    res.write_curve(curve)
    result = {"recipe": "dse", "alpha": dp.alpha, "pooling": dp.pooling, "head_dim": student.head.dim,
              "gold_pairs": len(gold), "silver_pairs": len(labelled), **res.summary()}
    write_json(report, result)
    return result


def rtt_ensemble(params: Params, clean: Path, silver: Path, pseudo: Path, bi: Path, cross: Path, report: Path,
                 curve: Path, cycles_plot: Path) -> dict:
    """Distil the ensemble into one bi-encoder: it learns the ensemble's embedding of each corpus sentence."""
    dp, sp, ep = params.ensemble.distill, params.student, params.evaluate
    _, gen = seed_all(params.seed)
    file = silver / schemas.ENSEMBLE_FILE
    sentences, target = ensemble.read_embeddings(file)
    scored = {s: schemas.read(clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
    student = BiEncoder.load(sp.model, sp.max_length, sp.trust_remote_code, sp.layers)
    ensemble.check_dims(student, target.shape[1], file)
    start = split_scores(student, scored, ep)
    res = fit_at(student, ensemble.distill_loss(student, dp.infonce_weight, dp.temperature), sentences, sentences,
                 target, scored["dev"], dp, ep, gen, desc="student")
    student.save(bi, cards.card("RTT-ensemble student", "bi", params.student.model, {
        "dataset": params.data.name, "sentences": len(sentences), "teacher": "ensemble in models/teacher",
        "loss": f"{1 - dp.infonce_weight:g} MAE + {dp.infonce_weight:g} InfoNCE (temperature {dp.temperature}) "
                "to the ensemble's embeddings", **cards.fit_facts(res.summary(), dp), "seed": params.seed},
        "Distilled from an ensemble of contrastive sub-models; no gold score was learned."))
    write_note_dir(cross, "recipe rtt-ensemble has no cross-encoder; its teacher is the ensemble of sub-models "
                          "in models/teacher")
    with atomic_dir(pseudo) as tmp:  # what the student learned: the ensemble's embeddings
        shutil.copyfile(file, tmp / schemas.pseudo_file(1, "ensemble"))
    write_csv_rows(cycles_plot, CYCLE_COLUMNS, [_row(0, start, None), _row(1, split_scores(student, scored, ep), None)])
    res.write_curve(curve)
    result = {"recipe": "rtt-ensemble", "cycle": 1, "sentences": len(sentences), "dim": int(target.shape[1]),
              "infonce_weight": dp.infonce_weight, "temperature": dp.temperature, **res.summary()}
    write_json(report, result)
    return result


def _best(steps: list[Step]) -> Step:
    """Highest dev Spearman; the earliest wins a tie."""
    return max(steps, key=lambda s: (s.meta["dev"]["spearman"], -steps.index(s)))


def _summary(s: Step) -> dict:
    return {"step": s.name, "cycle": s.cycle, "dev": s.meta["dev"], "test": s.meta["test"],
            "best_step": s.meta["fit"]["best_step"], "train_seconds": s.meta["fit"]["train_seconds"]}


def _write_cycle_plots(steps: list[Step], cycles: int, bi_epochs: int, cycles_plot: Path, curve: Path) -> list[dict]:
    """Score per cycle (best member of each role; cycle 0: the starting bi-encoder) and the first
    member's bi-encoder dev curve with the cycles laid end to end. Returns the per-cycle summary."""
    start = max(steps[0].meta["members"], key=lambda m: m["dev"]["spearman"])
    rows, per_cycle, curve_rows, offset = [_row(0, start, None)], [], [], 0
    for c in range(1, cycles + 1):
        bis = [s for s in steps if s.cycle == c and s.role == "bi"]
        crosses = [s for s in steps if s.cycle == c and s.role == "cross"]
        per_cycle.append({"cycle": c, "bi": [_summary(s) for s in bis], "cross": [_summary(s) for s in crosses]})
        rows.append(_row(c, _best(bis).meta, _best(crosses).meta))
        curve_rows += [[offset + r["step"], round(c - 1 + r["epoch"] / bi_epochs, 3), r["dev"]] for r in bis[0].meta["curve"]]
        offset += bis[0].meta["fit"]["steps"]
    write_csv_rows(cycles_plot, CYCLE_COLUMNS, rows)
    write_csv_rows(curve, ["step", "epoch", "dev_spearman"], curve_rows)
    return per_cycle


def trans_encoder(params: Params, clean: Path, pairs: Path, pseudo: Path, bi: Path, cross: Path, report: Path,
                  curve: Path, cycles_plot: Path, store: Store | None = None) -> dict:
    """Run or resume the Trans-Encoder cycles; write the labellings, the selected models and the scores."""
    tp = params.trans
    files = {s: clean / f"{s}.parquet" for s in ("train", "dev", "test")}
    splits = {s: schemas.read(f, schemas.PAIRS) for s, f in files.items()}
    cands_file = pairs / schemas.CANDIDATES_FILE
    cands = schemas.read(cands_file, schemas.CANDIDATES) if tp.sampled else None
    learned = unlabelled_pairs({s: splits[s] for s in tp.splits}, cands)
    inputs = [files[s] for s in sorted({*tp.splits, "dev", "test"})] + ([cands_file] if tp.sampled else [])
    store = store or Store()
    swept = store.sweep()  # temp dirs of killed runs
    engine = TransEncoder(params, learned, splits["dev"], splits["test"], store, run_fingerprint(params, inputs))
    steps = engine.run(params.cycles)

    with atomic_dir(pseudo) as tmp:
        for s in steps:
            if s.role.startswith("label-"):
                shutil.copyfile(s.path / LABELS, tmp / schemas.pseudo_file(s.cycle, s.role.removeprefix("label-")))
    best_bi = _best([s for s in steps if s.role == "bi"])
    best_cross = _best([s for s in steps if s.role == "cross"])
    for role, best, base, out in (("bi-encoder", best_bi, params.student.model, bi),
                                  ("cross-encoder", best_cross, params.teacher.model, cross)):
        _copy_dir(best.model, out, cards.card(f"Trans-Encoder {role}", role[:2] if role == "bi-encoder" else "cross",
                                              base, {"dataset": params.data.name, "selected step": best.name,
                                                     "cycles run": params.cycles, "init": tp.init,
                                                     "dev Spearman x100 (selection)": best.meta["dev"]["spearman"],
                                                     "pairs learned (scores dropped)": len(learned), "seed": params.seed},
                                              "Unsupervised: the bi- and cross-encoder labelled the pairs for each other."))
    per_cycle = _write_cycle_plots(steps, params.cycles, tp.bi.epochs, cycles_plot, curve)
    result = {
        "recipe": "trans-encoder", "cycles": params.cycles, "init": tp.init, "members": len(engine.members),
        "pairs": len(learned), "pairs_by_source": learned["strategy"].value_counts().sort_index().to_dict(),
        "start": steps[0].meta["members"], "per_cycle": per_cycle,
        "selected": {"bi": _summary(best_bi), "cross": _summary(best_cross)},
        "steps": {"computed": [s.name for s in steps if s.computed], "reused": [s.name for s in steps if not s.computed],
                  "seconds": round(sum(s.seconds for s in steps), 1),
                  "corrupt_moved_aside": len(store.corrupt), "orphans_swept": len(swept)},
    }
    write_json(report, result)
    return result


def distill(params: Params, clean: Path, pairs: Path, silver: Path, teacher: Path, pseudo: Path, bi: Path,
            cross: Path, report: Path, curve: Path, cycles_plot: Path) -> dict:
    """Train the recipe's student(s) and write models/bi, models/cross and data/pseudo."""
    if params.recipe == "trans-encoder":
        return trans_encoder(params, clean, pairs, pseudo, bi, cross, report, curve, cycles_plot)
    if params.recipe == "rtt-ensemble":
        return rtt_ensemble(params, clean, silver, pseudo, bi, cross, report, curve, cycles_plot)
    if params.recipe == "dse":
        return dse(params, clean, silver, teacher, pseudo, bi, cross, report, curve, cycles_plot)
    return augsbert(params, clean, silver, teacher, pseudo, bi, cross, report, curve, cycles_plot)


if __name__ == "__main__":
    run_stage(distill, ["clean", "pairs", "silver", "teacher", "pseudo", "bi", "cross", "report", "curve",
                        "cycles_plot"])
