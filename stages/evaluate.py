"""evaluate: score the student, the teacher and the baselines on dev and test (and on extra sets).

Regression: Spearman (primary) and Pearson x100; baselines: the untrained start, gold-only SBERT, word
overlap (Jaccard). Classification: AUC (primary), AUC(0.05), and F1 and accuracy at the threshold that
maximises F1 on dev (the same threshold applied to test); one more baseline, the majority label."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pldistill import cleaning, datasets, schemas
from pldistill.config import EvaluateParams, ExtraSet, Params
from pldistill.io import write_csv_rows, write_json
from pldistill.metrics import best_threshold, classification, correlation, jaccard
from pldistill.dse import DSE, HEAD_DIR
from pldistill.ensemble import Ensemble
from pldistill.models import BiEncoder, CrossModel
from pldistill.runtime import run_stage


def _teacher(params: Params, cross: Path, teacher: Path) -> Ensemble | CrossModel:
    """The recipe's teacher: the sub-model ensemble for rtt-ensemble, else the cross-encoder."""
    if params.recipe == "rtt-ensemble":
        ep = params.ensemble
        return Ensemble.load(teacher, ep.weights, ep.weight_temperature, params.teacher.max_length)
    return CrossModel.load(str(cross), params.teacher.max_length)


def _blocks(models: dict, splits: dict[str, pd.DataFrame], train: pd.DataFrame, task: str, ep: EvaluateParams,
            ens: Ensemble | None) -> tuple[dict, dict]:
    """eval.json's blocks for one dataset's dev and test splits, and every model's predictions."""
    preds = {name: {s: m.score(df["sentence1"], df["sentence2"], ep.batch_size, ep.bf16, progress=True)
                    for s, df in splits.items()} for name, m in models.items()}
    preds["jaccard"] = {s: jaccard(df["sentence1"], df["sentence2"]) for s, df in splits.items()}
    baselines = ["start", "gold", "jaccard"]
    if task == "classification":  # every pair gets the training set's more frequent label
        majority = float(train["score"].mean() >= 0.5)
        preds["majority"] = {s: np.full(len(df), majority) for s, df in splits.items()}
        baselines.append("majority")

    def block(name: str) -> dict:
        if task == "regression":
            return {s: correlation(preds[name][s], df["score"]) for s, df in splits.items()}
        t = 0.5 if name == "majority" else best_threshold(preds[name]["dev"], splits["dev"]["score"])
        return {**{s: classification(preds[name][s], df["score"], t) for s, df in splits.items()},
                "threshold": round(t, 6)}

    teacher_block = ({"ensemble": block("cross"), "submodels": {n: block(f"sub/{n}") for n in ens.names}}
                     if ens else {"cross": block("cross")})
    return {"bi": block("bi"), **teacher_block, "baseline": {b: block(b) for b in baselines}}, preds


def _extra_set(x: ExtraSet, params: Params) -> tuple[dict[str, pd.DataFrame], pd.DataFrame, str]:
    """An extra evaluation set's dev and test (normalised as stage augment normalises), train, task."""
    loaded = datasets.load(x.data, params.seed)
    form = params.augment.unicode_form
    splits = {s: cleaning.normalise_pairs(loaded.splits[s], form) for s in ("dev", "test")}
    return splits, loaded.splits["train"], datasets.task_of(x.data, loaded.splits["train"])


def evaluate(params: Params, clean: Path, bi: Path, cross: Path, teacher: Path, gold: Path, out: Path,
             predictions: Path) -> dict:
    """Write metrics/eval.json and test predictions for plots.

    eval.json: {"bi", "cross", "baseline": {"start", "gold", "jaccard"[, "majority"]}}, each {"dev", "test"}
    (classification blocks add the dev-chosen "threshold"); baseline.start is the student's starting
    model untrained, baseline.gold the bi-encoder trained on gold only (SBERT). recipe rtt-ensemble has
    no cross-encoder: "ensemble" (the teacher) and "submodels" take its place. Each set in
    evaluate.extra gets the same blocks under "extra": {name: ...}.
    In the predictions plot, column `cross` is the teacher's score, whichever kind it is.
    """
    ep = params.evaluate
    splits = {s: schemas.read(clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
    train = schemas.read(clean / "train.parquet", schemas.PAIRS)
    extra = {x.name: _extra_set(x, params) for x in ep.extra}  # read first: a bad source fails fast
    models = {
        # A DSE student scores pairs through its head (at its training length); a bi-encoder by cosine.
        "bi": DSE.load(bi) if (bi / HEAD_DIR).is_dir() else BiEncoder.load(str(bi), params.student.max_length),
        "cross": _teacher(params, cross, teacher),
        "gold": BiEncoder.load(str(gold), params.student.max_length),
        "start": BiEncoder.load(params.student.model, params.student.max_length, params.student.trust_remote_code),
    }
    ens = models["cross"] if isinstance(models["cross"], Ensemble) else None
    if ens:  # each sub-model scored on its own too
        models.update({f"sub/{n}": m for n, m in zip(ens.names, ens.members)})
    result, preds = _blocks(models, splits, train, datasets.task_of(params.data, train), ep, ens)
    if extra:
        result["extra"] = {name: _blocks(models, x_splits, x_train, task, ep, ens)[0]
                           for name, (x_splits, x_train, task) in extra.items()}
    write_json(out, result)
    test = splits["test"]
    write_csv_rows(predictions, ["gold", "bi", "cross", "start", "gold_bi"],
                   [[round(g, 4), *(round(float(preds[m]["test"][i]), 4) for m in ("bi", "cross", "start", "gold"))]
                    for i, g in enumerate(test["score"])])
    return result


if __name__ == "__main__":
    run_stage(evaluate, ["clean", "bi", "cross", "teacher", "gold", "out", "predictions"])
