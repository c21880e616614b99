"""evaluate: Spearman/Pearson x100 on dev and test for the student, the teacher and the baselines."""

from __future__ import annotations

from pathlib import Path

from pldistill import schemas
from pldistill.config import Params
from pldistill.io import write_csv_rows, write_json
from pldistill.metrics import correlation, jaccard
from pldistill.dse import DSE, HEAD_DIR
from pldistill.ensemble import Ensemble, score_members
from pldistill.models import BiEncoder, CrossModel
from pldistill.runtime import run_stage


def _teacher(params: Params, cross: Path, teacher: Path) -> Ensemble | CrossModel:
    """The recipe's teacher: the sub-model ensemble for rtt-ensemble, else the cross-encoder."""
    if params.recipe == "rtt-ensemble":
        ep = params.ensemble
        return Ensemble.load(teacher, ep.weights, ep.weight_temperature, params.teacher.max_length)
    return CrossModel.load(str(cross), params.teacher.max_length)


def evaluate(params: Params, clean: Path, bi: Path, cross: Path, teacher: Path, gold: Path, out: Path,
             predictions: Path) -> dict:
    """Write metrics/eval.json and test predictions for plots.

    eval.json: {"bi", "cross", "baseline": {"start", "gold", "jaccard"}}; baseline.start is the student's
    starting model untrained, baseline.gold the bi-encoder trained on gold only (SBERT). recipe
    rtt-ensemble has no cross-encoder: "ensemble" (the teacher) and "submodels" take its place.
    In the predictions plot, column `cross` is the teacher's score, whichever kind it is.
    """
    ep = params.evaluate
    splits = {s: schemas.read(clean / f"{s}.parquet", schemas.PAIRS) for s in ("dev", "test")}
    models = {
        # A DSE student scores pairs through its head (at its training length); a bi-encoder by cosine.
        "bi": DSE.load(bi) if (bi / HEAD_DIR).is_dir() else BiEncoder.load(str(bi), params.student.max_length),
        "cross": _teacher(params, cross, teacher),
        "gold": BiEncoder.load(str(gold), params.student.max_length),
        "start": BiEncoder.load(params.student.model, params.student.max_length, params.student.trust_remote_code),
    }
    preds = {name: {s: m.score(df["sentence1"], df["sentence2"], ep.batch_size, ep.bf16, progress=True)
                    for s, df in splits.items()} for name, m in models.items()}
    preds["jaccard"] = {s: jaccard(df["sentence1"], df["sentence2"]) for s, df in splits.items()}

    def block(name: str) -> dict:
        return {s: correlation(preds[name][s], df["score"]) for s, df in splits.items()}

    teacher_block = ({"ensemble": block("cross"), "submodels": score_members(models["cross"], splits, ep)}
                     if isinstance(models["cross"], Ensemble) else {"cross": block("cross")})
    result = {"bi": block("bi"), **teacher_block,
              "baseline": {"start": block("start"), "gold": block("gold"), "jaccard": block("jaccard")}}
    write_json(out, result)
    test = splits["test"]
    write_csv_rows(predictions, ["gold", "bi", "cross", "start", "gold_bi"],
                   [[round(g, 4), *(round(float(preds[m]["test"][i]), 4) for m in ("bi", "cross", "start", "gold"))]
                    for i, g in enumerate(test["score"])])
    return result


if __name__ == "__main__":
    run_stage(evaluate, ["clean", "bi", "cross", "teacher", "gold", "out", "predictions"])
